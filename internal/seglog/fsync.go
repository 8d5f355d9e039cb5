package seglog

import (
	"errors"
	"os"
)

// The package's fsyncs. Each tells the fsync observer (synchook.go) what it
// made durable and lets the fault hook (syncfault.go) fail it.

// fsyncError is the failure of an fsync itself, as opposed to failing to
// open the file or directory to fsync: what the fsync should have made
// durable may be lost even if a later fsync succeeds (Linux reports a
// write-back error once), so a log that gets one fails.
type fsyncError struct{ err error }

func (e *fsyncError) Error() string { return e.err.Error() }
func (e *fsyncError) Unwrap() error { return e.err }

// isFsyncFailure reports whether err comes from a failed fsync.
func isFsyncFailure(err error) bool {
	var fe *fsyncError
	return errors.As(err, &fe)
}

// datasync fdatasyncs f, a file written front to back in one go (a
// compacted segment being written).
func datasync(f *os.File) error { return syncData(f, -1) }

// syncData fdatasyncs f. dataEnd >= 0 is the end of the data the fsync is
// asked to cover, and all the observer is told is durable: the file may be
// longer (writes that landed meanwhile, preallocated space).
func syncData(f *os.File, dataEnd int64) error {
	before := statForHook(f) // nil unless a test installed SetSyncHook
	err := fdatasync(f)
	if err == nil {
		err = injectedFault("fdatasync", f.Name())
	}
	if err != nil {
		return &fsyncError{err}
	}
	reportSync(f, withSize(before, dataEnd))
	return nil
}

// syncFile is f.Sync (index files, whose every byte is data).
func syncFile(f *os.File) error {
	before := statForHook(f)
	err := f.Sync()
	if err == nil {
		err = injectedFault("fsync", f.Name())
	}
	if err != nil {
		return &fsyncError{err}
	}
	reportSync(f, before)
	return nil
}

// syncDir fsyncs a directory so that creates, renames and unlinks in it are
// durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close() // nothing written through it: a close error has nothing to report
	err = d.Sync()
	if err == nil {
		err = injectedFault("fsync", dir)
	}
	if err != nil {
		return &fsyncError{err}
	}
	return nil
}

// syncDirs fsyncs each directory in turn, stopping at the first error.
func syncDirs(dirs []string) error {
	for _, d := range dirs {
		if err := syncDir(d); err != nil {
			return err
		}
	}
	return nil
}
