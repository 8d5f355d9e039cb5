//go:build !unix

package node

// dirLock stands for the data directory's lock (lock_unix.go). Without
// flock(2) this platform takes none: two processes on one directory are not
// refused here.
type dirLock struct{}

func lockDataDir(string) (*dirLock, error) { return &dirLock{}, nil }

func (*dirLock) release() error { return nil }
