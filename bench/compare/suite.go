package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// suite is one run of the benchmark command: its settings, its temporary
// directory, the processes it started and the rows collected so far.
type suite struct {
	opts     options
	root     string // module root: where ./cmd/wharf is built and docs/ written
	work     string // temporary directory holding every server's data
	wharfBin string
	procs    children
	progress io.Writer
	base     time.Time // zero of the latency stamps in message bodies
	seq      int       // for unique topic, queue and stream names
	// profileSeq numbers Wharf processes started under -wharf-cpuprofile.
	profileSeq int

	wharf       *wharfServer
	rows        []row
	limits      []string             // "what: figure" lines for the machine section
	versions    []string             // "peer: version" lines
	skipped     []string             // peers or sections not run, and why
	medians     map[string]figures   // figures of earlier comparisons, by key, for rows that reuse them
	runs        map[string][]figures // every run behind a median of a comparison, in turn order
	loadAtStart string
}

// run executes the suite and writes the report.
func run(ctx context.Context, o options) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp(o.dir, "wharf-compare-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	s := &suite{opts: o, root: root, work: work, progress: os.Stderr, base: time.Now(), medians: map[string]figures{}, runs: map[string][]figures{}}
	defer s.procs.stopAll()

	started := time.Now()
	s.loadAtStart = loadAverage()
	s.logf("compare: %d run(s) of %v after %v warm-up per figure; data under %s", o.runs, o.duration, o.warmup, work)
	s.wharfBin, err = buildWharf(ctx, root, work)
	if err != nil {
		return err
	}
	s.wharf, err = s.startWharf(ctx, filepath.Join(work, "wharf-data"))
	if err != nil {
		return fmt.Errorf("start wharf: %w", err)
	}

	sections := []struct {
		name  string
		scale bool // a cost-of-scale section: run with -scale or when named in -only
		run   func(context.Context) error
	}{
		{"limits", false, s.limitsSection},
		{"amqp", false, s.amqpSection},
		{"kafka", false, s.kafkaSection},
		{"stream", false, s.streamSection},
		{"nats", false, s.natsSection},
		{"jetstream", false, s.jetstreamSection},
		{"idle", true, s.idleSection},
		{"catchup", true, s.catchupSection},
		{"scale", true, s.scaleSection},
		{"cluster", true, s.onlyWhenNamed("cluster", s.clusterSection)},
		{"security", false, s.onlyWhenNamed("security", s.securitySection)},
		{"amqpcluster", true, s.onlyWhenNamed("amqpcluster", s.amqpClusterSection)},
	}
	for _, sec := range sections {
		if !s.selected(sec.name, sec.scale) {
			continue
		}
		if err := sec.run(ctx); err != nil {
			return fmt.Errorf("%s: %w", sec.name, err)
		}
	}
	if err := s.wharf.terminate(time.Minute); err != nil {
		s.logf("stopping wharf: %v", err)
	}

	doc := s.report(describeMachine(work), time.Since(started))
	fmt.Print(doc)
	if o.out == "" {
		return nil
	}
	out := o.out
	if !filepath.IsAbs(out) {
		out = filepath.Join(root, out)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(out, []byte(doc), 0o644); err != nil {
		return err
	}
	s.logf("compare: wrote %s (%v in all)", out, time.Since(started).Round(time.Second))
	return nil
}

// selected reports whether section runs: the sections named in -only, or
// without -only every section that is not a cost-of-scale one; -scale adds
// the cost-of-scale sections in either case.
func (s *suite) selected(section string, scale bool) bool {
	if scale && s.opts.scale {
		return true
	}
	if s.opts.only == "" {
		return !scale
	}
	for _, name := range strings.Split(s.opts.only, ",") {
		if strings.TrimSpace(name) == section {
			return true
		}
	}
	return false
}

// moduleRoot is the directory of the go.mod of the current directory's
// module (the command is meant to run from the repository).
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("run from inside the Wharf module (go run ./bench/compare)")
	}
	return filepath.Dir(gomod), nil
}

func (s *suite) logf(format string, args ...any) {
	fmt.Fprintf(s.progress, format+"\n", args...)
}

// uniqueName returns prefix plus a number not used before in this suite.
func (s *suite) uniqueName(prefix string) string {
	s.seq++
	return fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), s.seq)
}

// stamp writes the current time into the first 8 bytes of body.
func (s *suite) stamp(body []byte) { s.stampAt(body, time.Now()) }

// stampAt writes t into the first 8 bytes of body, as nanoseconds since
// the suite began (monotonic, since publisher and consumer share this
// process).
func (s *suite) stampAt(body []byte, t time.Time) {
	if len(body) >= 8 {
		binary.LittleEndian.PutUint64(body, uint64(t.Sub(s.base)))
	}
}

// stampTime is the time written into body by stamp.
func (s *suite) stampTime(body []byte) time.Time {
	if len(body) < 8 {
		return time.Time{}
	}
	return s.base.Add(time.Duration(binary.LittleEndian.Uint64(body)))
}

// sinceStamp is how long ago body was stamped.
func (s *suite) sinceStamp(body []byte) time.Duration { return time.Since(s.stampTime(body)) }

// wharfVersion describes the Wharf source measured: the commit and whether
// the working tree had changes.
func (s *suite) wharfVersion() string {
	cmd := exec.Command("git", "rev-parse", "--short", "HEAD")
	cmd.Dir = s.root
	commit, err := cmd.Output()
	if err != nil {
		return "unknown commit"
	}
	v := "commit " + string(bytes.TrimSpace(commit))
	cmd = exec.Command("git", "status", "--porcelain", "--untracked-files=no")
	cmd.Dir = s.root
	if out, err := cmd.Output(); err == nil && len(bytes.TrimSpace(out)) > 0 {
		v += " with uncommitted changes"
	}
	return v
}
