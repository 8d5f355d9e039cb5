package raft

import (
	"context"
	"fmt"
	"log/slog"
)

// raftLogger gives etcd raft's log lines to slog: its chatty Info lines
// (every election of every group) at Debug, warnings and errors as they
// are. Fatal and Panic panic, as etcd raft expects of them.
type raftLogger struct{ l *slog.Logger }

func (r raftLogger) log(level slog.Level, msg string) {
	if r.l.Enabled(context.Background(), level) {
		r.l.Log(context.Background(), level, msg)
	}
}

func (r raftLogger) Debug(v ...any) { r.log(slog.LevelDebug, fmt.Sprint(v...)) }
func (r raftLogger) Debugf(format string, v ...any) {
	r.log(slog.LevelDebug, fmt.Sprintf(format, v...))
}
func (r raftLogger) Info(v ...any)                 { r.log(slog.LevelDebug, fmt.Sprint(v...)) }
func (r raftLogger) Infof(format string, v ...any) { r.log(slog.LevelDebug, fmt.Sprintf(format, v...)) }
func (r raftLogger) Warning(v ...any)              { r.log(slog.LevelWarn, fmt.Sprint(v...)) }
func (r raftLogger) Warningf(format string, v ...any) {
	r.log(slog.LevelWarn, fmt.Sprintf(format, v...))
}
func (r raftLogger) Error(v ...any) { r.log(slog.LevelError, fmt.Sprint(v...)) }
func (r raftLogger) Errorf(format string, v ...any) {
	r.log(slog.LevelError, fmt.Sprintf(format, v...))
}
func (r raftLogger) Fatal(v ...any)                 { panic(fmt.Sprint(v...)) }
func (r raftLogger) Fatalf(format string, v ...any) { panic(fmt.Sprintf(format, v...)) }
func (r raftLogger) Panic(v ...any)                 { panic(fmt.Sprint(v...)) }
func (r raftLogger) Panicf(format string, v ...any) { panic(fmt.Sprintf(format, v...)) }
