package seglog

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wharf-mq/wharf/internal/record"
)

func TestConcurrentDurableAppendersGetConsecutiveOffsets(t *testing.T) {
	dir := t.TempDir()
	cfg := smallConfig()
	cfg.SegmentBytes = 16 << 10 // rolls happen while appenders wait for fsyncs
	l := mustOpen(t, dir, cfg)
	const writers, perWriter, perBatch = 8, 40, 3
	type got struct {
		base int64
		tag  string
	}
	results := make(chan got, writers*perWriter)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				tag := fmt.Sprintf("w%d-%d", w, i)
				recs := make([]record.Record, perBatch)
				for j := range recs {
					recs[j] = record.Record{Value: []byte(fmt.Sprintf("%s-%d", tag, j))}
				}
				res, err := l.Append(record.NewBatch(0, recs), AppendOptions{Durable: true})
				if err != nil {
					t.Error(err)
					return
				}
				if res.LastOffset != res.BaseOffset+perBatch-1 {
					t.Errorf("result %+v", res)
				}
				results <- got{res.BaseOffset, tag}
			}
		}()
	}
	// The background flusher's Sync and a consumer run alongside; the
	// consumer must only ever see whole, valid batches.
	stop := make(chan struct{})
	var side sync.WaitGroup
	side.Add(2)
	go func() {
		defer side.Done()
		for {
			select {
			case <-stop:
				return
			default:
				if err := l.Sync(); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
	go func() {
		defer side.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			s, err := l.Read(0, 1<<30)
			if err != nil {
				t.Error(err)
				return
			}
			b, err := s.Bytes()
			s.Release()
			if err != nil {
				t.Error(err)
				return
			}
			for len(b) > 0 {
				h, err := record.Verify(b)
				if err != nil {
					t.Errorf("reader saw a bad batch: %v", err)
					return
				}
				b = b[h.Size():]
			}
		}
	}()
	wg.Wait()
	close(stop)
	side.Wait()
	close(results)

	var all []got
	for g := range results {
		all = append(all, g)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].base < all[j].base })
	if len(all) != writers*perWriter {
		t.Fatalf("%d results", len(all))
	}
	for i, g := range all {
		if g.base != int64(i*perBatch) {
			t.Fatalf("batch %d got base offset %d: offsets not consecutive and unique", i, g.base)
		}
	}
	l.mu.RLock()
	synced, end := l.synced, l.end
	l.mu.RUnlock()
	if synced != end {
		t.Fatalf("synced %d < end %d after every durable append returned", synced, end)
	}
	// Every record is where its Append said it would be.
	s, err := l.Read(0, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := s.Bytes()
	s.Release()
	recs := decodeAll(t, b)
	for _, g := range all {
		want := g.tag + "-0"
		if string(recs[g.base].value) != want {
			t.Fatalf("offset %d holds %q, want %q", g.base, recs[g.base].value, want)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestSyncPersistsRecoveryPoint(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, smallConfig())
	defer l.Close()
	end := appendBatches(t, l, 5, 2, 0)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	// Just after Open: throttled, the file still says 0.
	if rp, _, _ := readOffsetFile(dir, recoveryPointFile); rp != 0 {
		t.Fatalf("recovery point %d written within the throttle interval", rp)
	}
	l.checkpointMu.Lock()
	l.lastCheckpoint = l.lastCheckpoint.Add(-checkpointInterval)
	l.checkpointMu.Unlock()
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if rp, _, _ := readOffsetFile(dir, recoveryPointFile); rp != end {
		t.Fatalf("recovery point %d, want %d", rp, end)
	}
}

// SyncData makes the data durable and leaves the recovery point to
// Checkpoint, which writes it at most every interval it is given.
func TestSyncDataLeavesTheRecoveryPointToCheckpoint(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, smallConfig())
	defer l.Close()
	end := appendBatches(t, l, 5, 2, 0)
	l.checkpointMu.Lock()
	l.lastCheckpoint = l.lastCheckpoint.Add(-time.Hour) // nothing throttles it
	l.checkpointMu.Unlock()
	if err := l.SyncData(); err != nil {
		t.Fatal(err)
	}
	if l.synced < end {
		t.Fatalf("synced %d after SyncData, want %d", l.synced, end)
	}
	if rp, _, _ := readOffsetFile(dir, recoveryPointFile); rp != 0 {
		t.Fatalf("SyncData wrote the recovery point %d", rp)
	}
	l.Checkpoint(time.Minute)
	if rp, _, _ := readOffsetFile(dir, recoveryPointFile); rp != end {
		t.Fatalf("recovery point %d after Checkpoint, want %d", rp, end)
	}
	next := appendBatches(t, l, 1, 2, 0)
	if err := l.SyncData(); err != nil {
		t.Fatal(err)
	}
	l.Checkpoint(time.Minute)
	if rp, _, _ := readOffsetFile(dir, recoveryPointFile); rp != end {
		t.Fatalf("recovery point %d within a minute of the last, want it left at %d", rp, end)
	}
	l.Checkpoint(0)
	if rp, _, _ := readOffsetFile(dir, recoveryPointFile); rp != next {
		t.Fatalf("recovery point %d, want %d", rp, next)
	}
}

// TestSyncSucceedsWhenOnlyTheRecoveryPointFails: the queue stores
// acknowledge confirms on Sync's nil error. A recovery point that cannot be
// written (here a directory in the way of its temporary file; in the field,
// running out of descriptors) must not turn fsynced data into a nack, and
// the next Sync writes it once it can.
func TestSyncSucceedsWhenOnlyTheRecoveryPointFails(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, smallConfig())
	defer l.Close()
	end := appendBatches(t, l, 5, 2, 0)
	blocker := filepath.Join(dir, recoveryPointFile+tempSuffix)
	if err := os.MkdirAll(filepath.Join(blocker, "keep"), 0o755); err != nil {
		t.Fatal(err)
	}
	expireCheckpointThrottle := func() {
		l.checkpointMu.Lock()
		l.lastCheckpoint = l.lastCheckpoint.Add(-checkpointInterval)
		l.checkpointMu.Unlock()
	}
	expireCheckpointThrottle()
	if err := l.Sync(); err != nil {
		t.Fatalf("Sync with the data durable but the recovery point unwritable: %v", err)
	}
	if l.synced < end {
		t.Fatalf("synced %d after Sync, want %d", l.synced, end)
	}
	if err := os.RemoveAll(blocker); err != nil {
		t.Fatal(err)
	}
	expireCheckpointThrottle()
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if rp, _, _ := readOffsetFile(dir, recoveryPointFile); rp != end {
		t.Fatalf("recovery point %d once writable again, want %d", rp, end)
	}
}

// TestCommitPipeline: while a commit round's fsync is in flight, durable
// appends queue; when it returns, its own waiter is answered at once and
// one more round covers everything that queued, with no third fsync. The
// goroutine running the extra round ends when nobody waits (synctest fails
// the test if any goroutine is left).
func TestCommitPipeline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		l := mustOpen(t, dir, DefaultConfig())
		defer l.Close()
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
		entered := make(chan int64, 4) // the number of each fsync of the segment, as it completes
		release := make(chan struct{})
		var fsyncs atomic.Int64
		defer SetSyncFault(func(path string) error {
			if path == segmentPath(dir, 0, logSuffix) {
				entered <- fsyncs.Add(1)
				<-release
			}
			return nil
		})()
		defer close(release) // frees an unexpected third fsync when the test fails
		durableAppend := func(done chan<- int64) {
			res, err := l.Append(makeBatch(0, 1, 0), AppendOptions{Durable: true})
			if err != nil {
				t.Error(err)
			}
			done <- res.BaseOffset
		}
		first := make(chan int64, 1)
		go durableAppend(first)
		if n := <-entered; n != 1 {
			t.Fatalf("fsync %d first", n)
		}
		queued := make(chan int64, 3)
		for range 3 {
			go durableAppend(queued)
		}
		synctest.Wait() // all three appended and wait
		release <- struct{}{}
		if n := <-entered; n != 2 {
			t.Fatalf("fsync %d second", n)
		}
		synctest.Wait()
		select {
		case <-first:
		default:
			t.Fatal("the first append waits for the second round, which it does not need")
		}
		if len(queued) != 0 {
			t.Fatal("an append written during the first round returned before the second")
		}
		release <- struct{}{}
		for range 3 {
			<-queued
		}
		synctest.Wait()
		if n := fsyncs.Load(); n != 2 {
			t.Fatalf("%d fsyncs for appends that two rounds cover", n)
		}
	})
}
