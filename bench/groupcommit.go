package main

import (
	"fmt"
	"os"
	"sync"
	"time"
)

// The group-commit disk baseline: what the disk allows for the way a
// pipelined acks=all producer meets Wharf's log (internal/seglog). A
// writer keeps up to inFlight chunks written but not yet durable (franz-go
// keeps up to 5 produce requests in flight), and a syncer runs rounds of
// fdatasync back to back, each covering everything written when it
// started, as seglog's commit pipeline does. The file is preallocated
// ahead of the writes, as seglog preallocates its active segment, so the
// figure is the ceiling for this pattern, not a plain append's.

// groupCommitInFlight is how many chunks the baseline keeps unsynced:
// franz-go's limit of produce requests in flight per broker.
const groupCommitInFlight = 5

// groupCommitPreallocation is how far ahead of the writes the file is
// extended (seglog's largest step).
const groupCommitPreallocation = 4 << 20

// groupCommit is the state the writer and the syncer share, guarded by mu.
type groupCommit struct {
	mu      sync.Mutex
	changed sync.Cond // broadcast when written, synced, stop or err change
	written int64     // bytes written
	synced  int64     // bytes a finished fdatasync covered
	rounds  int64
	stop    bool
	err     error
}

// diskGroupCommit appends chunk-sized writes to a new file in dir until
// total bytes are durable or maxTime has passed (0: no cap), and returns
// the bytes made durable and how many fdatasync rounds that took. The file
// is removed afterwards.
func diskGroupCommit(dir string, total, chunk int64, inFlight int, maxTime time.Duration) (result, int64, error) {
	if chunk <= 0 || total <= 0 || inFlight <= 0 {
		return result{}, 0, fmt.Errorf("disk group commit: chunk %d, total %d and in-flight %d must be positive", chunk, total, inFlight)
	}
	f, err := os.CreateTemp(dir, "baseline-group-commit-*")
	if err != nil {
		return result{}, 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()

	g := &groupCommit{}
	g.changed.L = &g.mu
	syncerDone := make(chan struct{})
	go func() {
		defer close(syncerDone)
		g.syncRounds(f)
	}()
	start := time.Now()
	writeErr := g.write(f, payload(int(chunk)), total, int64(inFlight)*chunk, start, maxTime)
	g.mu.Lock()
	g.stop = true
	g.changed.Broadcast()
	g.mu.Unlock()
	<-syncerDone
	elapsed := time.Since(start)
	if writeErr != nil {
		return result{}, 0, writeErr
	}
	if g.err != nil {
		return result{}, 0, g.err
	}
	return result{bytes: g.synced, elapsed: elapsed}, g.rounds, f.Close()
}

// syncRounds is the syncer: while written bytes are not yet durable it
// fdatasyncs, each round covering what was written when it started.
func (g *groupCommit) syncRounds(f *os.File) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for {
		for g.written == g.synced && !g.stop {
			g.changed.Wait()
		}
		if g.written == g.synced {
			return // stopped with everything durable
		}
		target := g.written
		g.mu.Unlock()
		err := datasync(f)
		g.mu.Lock()
		if err != nil {
			g.err = err
			g.changed.Broadcast()
			return
		}
		g.synced = target
		g.rounds++
		g.changed.Broadcast()
	}
}

// write is the writer: it appends buf, waiting while limit bytes are
// unsynced, until total bytes are written or maxTime has passed, then
// waits for the last of them to be durable.
func (g *groupCommit) write(f *os.File, buf []byte, total, limit int64, start time.Time, maxTime time.Duration) error {
	var written, allocated int64
	for written < total && (maxTime <= 0 || time.Since(start) < maxTime) {
		g.mu.Lock()
		for g.written-g.synced >= limit && g.err == nil {
			g.changed.Wait()
		}
		err := g.err
		g.mu.Unlock()
		if err != nil {
			return nil // the syncer's error is reported
		}
		n := min(int64(len(buf)), total-written)
		if written+n > allocated {
			allocated = written + n + groupCommitPreallocation
			_ = preallocate(f, allocated) // where it cannot, writes extend the file
		}
		if _, err := f.WriteAt(buf[:n], written); err != nil {
			return err
		}
		written += n
		g.mu.Lock()
		g.written = written
		g.changed.Broadcast()
		g.mu.Unlock()
	}
	g.mu.Lock()
	for g.synced < g.written && g.err == nil {
		g.changed.Wait()
	}
	g.mu.Unlock()
	return nil
}
