package seglog

import (
	"sync/atomic"
	"time"
)

// CommitObserver sees every successful commit round of every Log in the
// process: how long its fsyncs took and how many offsets it made durable
// (the group-commit batch). It runs on the committing goroutine, under
// the Log's lock, so it must be quick and must not call into the Log.
type CommitObserver func(fsync time.Duration, offsets int64)

var commitObserver atomic.Pointer[CommitObserver]

// SetCommitObserver installs fn for every Log in the process (nil removes
// it), for the fsync latency and group-commit batch size metrics. Unset,
// it costs one atomic load per commit round.
func SetCommitObserver(fn CommitObserver) {
	if fn == nil {
		commitObserver.Store(nil)
		return
	}
	commitObserver.Store(&fn)
}

// observeCommit reports a successful commit round.
func observeCommit(fsync time.Duration, offsets int64) {
	if fn := commitObserver.Load(); fn != nil {
		(*fn)(fsync, offsets)
	}
}
