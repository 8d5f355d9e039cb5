package seglog

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
)

// failOnce returns a fault function that fails the first fsync of path
// with EIO, after closing inFlight (if not nil) and waiting for release (if
// not nil), and lets every other fsync through: the kernel's one-shot
// write-back error, which the next fsync no longer reports.
func failOnce(path string, inFlight, release chan struct{}) func(string) error {
	var once sync.Once
	return func(p string) error {
		if p != path {
			return nil
		}
		var fail bool
		once.Do(func() { fail = true })
		if !fail {
			return nil
		}
		if inFlight != nil {
			close(inFlight)
		}
		if release != nil {
			<-release
		}
		return syscall.EIO
	}
}

// wantFailedLog checks that l refuses everything after a failed fsync
// although the next fsync would succeed: durable waits for data that was
// not durable before, Sync, appends and Close.
func wantFailedLog(t *testing.T, l *Log, notDurable int64) {
	t.Helper()
	if err := l.waitDurableNow(notDurable); !errors.Is(err, syscall.EIO) {
		t.Errorf("WaitDurable(%d) after the failed fsync: %v, want EIO", notDurable, err)
	}
	if err := l.Sync(); !errors.Is(err, syscall.EIO) {
		t.Errorf("Sync after the failed fsync: %v, want EIO", err)
	}
	if _, err := l.Append(makeBatch(l.EndOffset(), 1, 0), AppendOptions{}); !errors.Is(err, syscall.EIO) {
		t.Errorf("Append after the failed fsync: %v, want EIO", err)
	}
	if err := l.Close(); !errors.Is(err, syscall.EIO) {
		t.Errorf("Close after the failed fsync: %v, want EIO", err)
	}
}

// TestOverlappingFailedFsyncIsNeverAcknowledged: the file cache fsyncs a
// log's segment to close it (another log needs the descriptor) and that
// fsync fails, slowly; meanwhile the log's own group commit fsyncs the same
// file, and the kernel (which reports a write-back error only once) lets
// that one succeed. The durable waiter must get the failure, never success.
func TestOverlappingFailedFsyncIsNeverAcknowledged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		withMaxOpenFiles(t, 1)
		root := t.TempDir()
		a := mustOpen(t, filepath.Join(root, "a"), DefaultConfig())
		b := mustOpen(t, filepath.Join(root, "b"), DefaultConfig())
		defer b.Close()
		end := appendBatches(t, a, 1, 1, 0) // not durable: a's file is dirty

		inFlight, release := make(chan struct{}), make(chan struct{})
		defer SetSyncFault(failOnce(segmentPath(a.Dir(), 0, logSuffix), inFlight, release))()
		releaseFsync := sync.OnceFunc(func() { close(release) })
		defer releaseFsync() // also when the test fails early
		appended := make(chan error, 1)
		go func() { // needs a's slot: the cache fsyncs a's file to close it
			_, err := b.Append(makeBatch(0, 1, 0), AppendOptions{})
			appended <- err
		}()
		<-inFlight
		acked := make(chan error, 1)
		go func() { acked <- a.waitDurableNow(end) }()
		synctest.Wait() // the waiter has returned or is blocked for good
		select {
		case err := <-acked:
			if err == nil {
				t.Fatal("a durable wait succeeded while an overlapping fsync of the same file was failing")
			}
			acked <- err
		default:
		}
		releaseFsync()
		if err := <-appended; err != nil {
			t.Fatalf("append to the other log: %v", err)
		}
		if err := <-acked; !errors.Is(err, syscall.EIO) {
			t.Fatalf("durable wait: %v, want EIO", err)
		}
		wantFailedLog(t, a, end)
	})
}

// TestFailedGroupCommitFailsEveryWaiterAndTheLog: the group commit's own
// fsync fails while several durable appenders wait for it; every one of
// them gets the error, the log stays failed although the next fsync would
// succeed, and what was durable before stays readable after a reopen.
func TestFailedGroupCommitFailsEveryWaiterAndTheLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		l := mustOpen(t, dir, DefaultConfig())
		durable := appendBatches(t, l, 3, 2, 0)
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}

		inFlight, release := make(chan struct{}), make(chan struct{})
		defer SetSyncFault(failOnce(segmentPath(dir, 0, logSuffix), inFlight, release))()
		const writers = 4
		results := make(chan error, writers)
		first, err := l.Append(makeBatch(durable, 1, 0), AppendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		go func() { results <- l.waitDurableNow(first.LastOffset + 1) }() // leads the round that fails
		<-inFlight
		for range writers - 1 {
			go func() {
				_, err := l.Append(makeBatch(0, 1, 0), AppendOptions{Durable: true})
				results <- err
			}()
		}
		synctest.Wait() // every writer has appended and waits
		close(release)
		for range writers {
			if err := <-results; !errors.Is(err, syscall.EIO) {
				t.Errorf("durable append: %v, want EIO", err)
			}
		}
		if err := l.waitDurableNow(durable); err != nil {
			t.Errorf("WaitDurable(%d) for data durable before the failure: %v", durable, err)
		}
		wantFailedLog(t, l, durable+1)

		l = mustOpen(t, dir, DefaultConfig())
		defer l.Close()
		s, err := l.Read(0, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := s.Bytes()
		s.Release()
		recs := decodeAll(t, b)
		if int64(len(recs)) < durable {
			t.Fatalf("read %d records after reopening, want at least the %d durable ones", len(recs), durable)
		}
		for _, r := range recs[:durable] {
			if string(r.value) != string(value(r.offset)) {
				t.Fatalf("offset %d holds %q after reopening", r.offset, r.value)
			}
		}
		if _, err := l.Append(makeBatch(l.EndOffset(), 1, 0), AppendOptions{Durable: true}); err != nil {
			t.Fatalf("durable append after reopening: %v", err)
		}
	})
}

// TestFailedDirectoryFsyncFailsTheLog: the first durable append of a new
// log fsyncs the log's directory; when that fails, the append fails and so
// does everything after it.
func TestFailedDirectoryFsyncFailsTheLog(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	l := mustOpen(t, dir, DefaultConfig())
	defer SetSyncFault(failOnce(dir, nil, nil))()
	if _, err := l.Append(makeBatch(0, 1, 0), AppendOptions{Durable: true}); !errors.Is(err, syscall.EIO) {
		t.Fatalf("durable append: %v, want EIO", err)
	}
	wantFailedLog(t, l, 1)
}

// TestFailedRollFsyncFailsTheLog: a roll fsyncs the segment it closes; if
// that fails, the append that rolled fails and the log with it.
func TestFailedRollFsyncFailsTheLog(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, smallConfig())
	appendBatches(t, l, 3, 3, 0)
	defer SetSyncFault(failOnce(segmentPath(dir, 0, logSuffix), nil, nil))()
	var err error
	for err == nil && len(segmentFiles(t, dir)) == 1 {
		_, err = l.Append(makeBatch(l.EndOffset(), 3, 0), AppendOptions{})
	}
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("append that rolled: %v, want EIO", err)
	}
	wantFailedLog(t, l, l.EndOffset())
}

// TestRollThatCannotWriteItsIndexIsRetried: a roll that fails for any
// other reason than an fsync (here the index file cannot be opened; on a
// full disk, its entries cannot be written) fails the append that rolled,
// not the log: once the cause is gone the next append rolls.
func TestRollThatCannotWriteItsIndexIsRetried(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, smallConfig())
	defer l.Close()
	appendBatches(t, l, 3, 3, 0)
	index := segmentPath(dir, 0, indexSuffix)
	if err := os.Remove(index); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(index, 0o755); err != nil { // opening it for writing fails
		t.Fatal(err)
	}
	var rollErr error
	for len(segmentFiles(t, dir)) == 1 && rollErr == nil {
		_, rollErr = l.Append(makeBatch(l.EndOffset(), 3, 0), AppendOptions{})
	}
	if rollErr == nil {
		t.Fatal("the roll succeeded without its index file")
	}
	if err := os.Remove(index); err != nil {
		t.Fatal(err)
	}
	end := appendBatches(t, l, 20, 3, 0)
	if n := len(segmentFiles(t, dir)); n < 2 {
		t.Fatalf("%d segments after the roll was retried", n)
	}
	if err := l.waitDurableNow(end); err != nil {
		t.Fatalf("durable wait after the retried roll: %v", err)
	}
	if got := int64(len(readAll(t, l, 1<<20))); got != end {
		t.Fatalf("read %d records, want %d", got, end)
	}
}

// TestNewLogNamesAreDurableBeforeTheFirstAck: Open creates the log's
// directory (and here two missing parents); before a durable append is
// acknowledged, the directory entries leading to its data are fsynced:
// the log's directory and the parent of every directory Open made. Until
// then a new log costs no fsync at all.
func TestNewLogNamesAreDurableBeforeTheFirstAck(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "x", "y", "log")
	var mu sync.Mutex
	var synced []string
	defer SetSyncFault(func(path string) error {
		mu.Lock()
		synced = append(synced, path)
		mu.Unlock()
		return nil
	})()
	fsyncs := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(synced)
	}

	l := mustOpen(t, dir, DefaultConfig())
	defer l.Close()
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := fsyncs(); len(got) != 0 {
		t.Fatalf("an empty new log fsynced %q", got)
	}
	if _, err := l.Append(makeBatch(0, 1, 0), AppendOptions{Durable: true}); err != nil {
		t.Fatal(err)
	}
	got := fsyncs()
	for _, want := range []string{dir, filepath.Dir(dir), filepath.Join(root, "x"), root} {
		if !slices.Contains(got, want) {
			t.Errorf("acknowledged before %s was fsynced (fsyncs: %q)", want, got)
		}
	}
}

// TestClosedLogIsNotDurable: WaitDurable on a closed log returns ErrClosed,
// never success (TestClosedLog checks Sync), and a durable waiter whose
// data a Delete dropped unsynced gets ErrClosed too, while one the round
// in flight covered gets success.
func TestClosedLogIsNotDurable(t *testing.T) {
	l := mustOpen(t, t.TempDir(), DefaultConfig())
	end := appendBatches(t, l, 2, 1, 0)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.waitDurableNow(end); !errors.Is(err, ErrClosed) {
		t.Errorf("WaitDurable on a closed log: %v, want ErrClosed", err)
	}

	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		l := mustOpen(t, dir, DefaultConfig())
		end := appendBatches(t, l, 2, 1, 0)
		inFlight, release := make(chan struct{}), make(chan struct{})
		defer SetSyncFault(func(path string) error {
			if path == segmentPath(dir, 0, logSuffix) {
				close(inFlight)
				<-release
			}
			return nil
		})()
		waited := make(chan error, 1)
		go func() { waited <- l.waitDurableNow(end) }()
		<-inFlight // the round is in flight; a second waiter queues behind it
		more := appendBatches(t, l, 1, 1, 0)
		second := make(chan error, 1)
		go func() { second <- l.waitDurableNow(more) }()
		deleted := make(chan error, 1)
		go func() { deleted <- l.Delete() }()
		synctest.Wait()
		close(release)
		if err := <-waited; err != nil {
			t.Errorf("waiter covered by the round in flight: %v", err)
		}
		if err := <-second; !errors.Is(err, ErrClosed) {
			t.Errorf("waiter whose data the Delete dropped: %v, want ErrClosed", err)
		}
		if err := <-deleted; err != nil {
			t.Errorf("Delete: %v", err)
		}
	})
}
