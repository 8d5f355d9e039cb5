package seglog

import (
	"os"
	"sync/atomic"
)

// Fault injection: fsync errors.
//
// A failed fsync is the one storage error a log cannot recover from by
// retrying: Linux reports a write-back error to one fsync of the file and
// then forgets it, so the next fsync may succeed although the data it
// should cover never reached the disk. Tests need such failures on demand,
// at a chosen moment and while other fsyncs are in flight, which no real
// disk gives them. SetSyncFault installs a function that sees every fsync
// of a segment's files and of a log's directory, in every Log of the
// process, just after the real fsync succeeded, and may turn it into a
// failure, as if the kernel had reported a write-back error.
//
// Unused, the fault hook costs one atomic pointer load per fsync.

var syncFault atomic.Pointer[func(path string) error]

// SetSyncFault installs fn (nil removes it) and returns a function
// restoring the previous one. fn is called with the path of the file or
// directory whose fsync just succeeded; a non-nil result is returned as
// that fsync's error instead. fn runs on the fsyncing goroutine, possibly
// under a Log's lock, so it must not call into the Log; it may block, which
// keeps that fsync in flight. For tests only.
func SetSyncFault(fn func(path string) error) (restore func()) {
	var p *func(string) error
	if fn != nil {
		p = &fn
	}
	prev := syncFault.Swap(p)
	return func() { syncFault.Store(prev) }
}

// injectedFault returns the failure the fault hook makes of a successful
// fsync of path, nil when there is none.
func injectedFault(op, path string) error {
	fn := syncFault.Load()
	if fn == nil {
		return nil
	}
	if err := (*fn)(path); err != nil {
		return &os.PathError{Op: op, Path: path, Err: err}
	}
	return nil
}
