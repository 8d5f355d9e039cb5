package replica

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/record"
	"github.com/wharf-mq/wharf/internal/seglog"
)

func openLocal(t *testing.T, opt Options) *Local {
	t.Helper()
	opt.Logger = slog.New(slog.DiscardHandler)
	l, err := Open(t.TempDir(), DefaultConfig(), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func batchOf(value string) []byte {
	return record.NewBatch(time.Now().UnixMilli(), []record.Record{{Value: []byte(value)}})
}

// logSyncs reports the data end of every fsync of a .log file in dir.
func logSyncs(t *testing.T, dir string) <-chan int64 {
	synced := make(chan int64, 100)
	restore := seglog.SetSyncHook(func(f seglog.SyncedFile) {
		if filepath.Dir(f.Path) == dir && strings.HasSuffix(f.Path, ".log") {
			select {
			case synced <- f.Stat.Size():
			default:
			}
		}
	})
	t.Cleanup(restore)
	return synced
}

// An acks=1 writer's data is fsynced once flushAheadBytes have gathered,
// long before the periodic flush (an hour here) would get to it.
func TestFlushAheadSyncsBeforeTheInterval(t *testing.T) {
	f := StartFlusher(time.Hour)
	defer f.Stop()
	l := openLocal(t, Options{Flusher: f})
	synced := logSyncs(t, l.Dir())

	batch := batchOf(strings.Repeat("x", 256<<10))
	var written int64
	for written < flushAheadBytes/2 {
		if _, err := l.Append(bytes.Clone(batch), AppendOptions{}); err != nil {
			t.Fatal(err)
		}
		written += int64(len(batch))
	}
	if got := l.unflushed.Load(); got != written || l.flushQueued.Load() {
		t.Fatalf("below the threshold: %d bytes counted of %d, queued %v", got, written, l.flushQueued.Load())
	}
	for written < flushAheadBytes+int64(len(batch)) {
		if _, err := l.Append(bytes.Clone(batch), AppendOptions{}); err != nil {
			t.Fatal(err)
		}
		written += int64(len(batch))
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case size := <-synced:
			if size >= flushAheadBytes {
				return
			}
		case <-deadline:
			t.Fatalf("%d bytes appended with acks=1, no fsync of them within 10 s", written)
		}
	}
}

// Appends whose acknowledgement waits for their commit do not count
// towards an early flush.
func TestCommittedAppendsDoNotCountTowardsFlushAhead(t *testing.T) {
	f := StartFlusher(time.Hour)
	defer f.Stop()
	l := openLocal(t, Options{Flusher: f})
	if _, err := l.Append(batchOf("a"), AppendOptions{AckCommitted: true}); err != nil {
		t.Fatal(err)
	}
	if got := l.unflushed.Load(); got != 0 {
		t.Errorf("acks=all append counted %d unflushed bytes", got)
	}
	one := batchOf("b")
	if _, err := l.Append(one, AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := l.unflushed.Load(); got != int64(len(one)) {
		t.Errorf("acks=1 append counted %d unflushed bytes, want %d", got, len(one))
	}
}

// The periodic flush fsyncs what no acknowledgement waited for.
func TestFlusherSyncsEveryInterval(t *testing.T) {
	f := StartFlusher(20 * time.Millisecond)
	defer f.Stop()
	l := openLocal(t, Options{Flusher: f})
	synced := logSyncs(t, l.Dir())
	batch := batchOf("unsynced")
	if _, err := l.Append(batch, AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case size := <-synced:
		if size < int64(len(batch)) {
			t.Fatalf("the flush covered %d bytes, want %d", size, len(batch))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nothing fsynced the append within 10 s")
	}
}

// The fsync policy decides what an acknowledgement waits for: acks=all
// waits for the commit unless the policy is interval, and under always
// every write waits.
func TestFsyncPolicyDecidesTheAck(t *testing.T) {
	for _, tc := range []struct {
		policy           FsyncPolicy
		committed, waits bool
	}{
		{FsyncOnAcksAll, true, true},
		{FsyncOnAcksAll, false, false},
		{FsyncAlways, true, true},
		{FsyncAlways, false, true},
		{FsyncInterval, true, false},
		{FsyncInterval, false, false},
	} {
		l := openLocal(t, Options{Fsync: tc.policy})
		a, err := l.Append(batchOf("x"), AppendOptions{AckCommitted: tc.committed})
		if err != nil {
			t.Fatal(err)
		}
		if waits := a.Ack != (Commit{}); waits != tc.waits {
			t.Errorf("%v, acks=all %v: the acknowledgement waits %v, want %v", tc.policy, tc.committed, waits, tc.waits)
		}
		if waits := l.AckFor(tc.committed, 1) != (Commit{}); waits != tc.waits {
			t.Errorf("%v, acks=all %v: AckFor waits %v, want %v", tc.policy, tc.committed, waits, tc.waits)
		}
	}
}
