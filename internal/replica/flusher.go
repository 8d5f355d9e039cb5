package replica

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Background flushing.
//
// A Flusher fsyncs what the acknowledgement path left unsynced, whatever
// the fsync policy, in two goroutines: one syncs every log it holds every
// interval (Local.Sync, which also writes the recovery point), the other,
// in between, any log that has taken flushAheadBytes of appends no
// acknowledgement waited for since its last flush began. The Kafka core
// gives one to its partitions (--flush-interval); logs whose writers wait
// for their own commits (the metadata log, queue stores) have none.
//
// The second bounds what a segment roll has to fsync. seglog fsyncs the
// segment it closes before the next append may go in (under the log's
// lock), so with only the periodic flush a roll waits for up to a flush
// interval of writes to reach the disk: measured with one acks=1 producer
// at 700-800 MB/s and 1 GiB segments, a 0.2-0.5 s stall of every append to
// the partition once every 1.3 s, a quarter of the producer's throughput.
// Flushed ahead, a roll finds at most about flushAheadBytes unsynced, tens
// of milliseconds of disk time; and the early flushes themselves fsync
// outside the log's lock, so appends go on meanwhile. The bytes reach the
// disk either way (the periodic flush would write them within a second);
// they only go in smaller, steadier pieces.

// flushAheadBytes is how many unsynced bytes a log gathers before it asks
// for an early flush.
const flushAheadBytes = 16 << 20

// flushSoonQueue bounds the logs waiting for an early flush; a log that
// finds the queue full asks again at its next append.
const flushSoonQueue = 256

// Flusher is the background flush of the Locals opened with it.
type Flusher struct {
	interval time.Duration

	mu   sync.Mutex
	logs map[*Local]struct{} // open logs, for the periodic flush

	soon chan *Local // logs that want an early flush
	stop chan struct{}
	wg   sync.WaitGroup
}

// StartFlusher starts a Flusher's goroutines, which sync every log every
// interval (which must be positive). Stop ends them.
func StartFlusher(interval time.Duration) *Flusher {
	f := &Flusher{
		interval: interval,
		logs:     map[*Local]struct{}{},
		soon:     make(chan *Local, flushSoonQueue),
		stop:     make(chan struct{}),
	}
	f.wg.Add(2)
	go f.flushLoop()
	go f.flushAheadLoop()
	return f
}

// Stop ends the background flushes (a flush in progress first finishes).
// The logs stay open: closing them makes them durable.
func (f *Flusher) Stop() {
	close(f.stop)
	f.wg.Wait()
}

func (f *Flusher) add(l *Local) {
	f.mu.Lock()
	f.logs[l] = struct{}{}
	f.mu.Unlock()
}

func (f *Flusher) remove(l *Local) {
	f.mu.Lock()
	delete(f.logs, l)
	f.mu.Unlock()
}

// flushLoop syncs every log every interval.
func (f *Flusher) flushLoop() {
	defer f.wg.Done()
	tick := time.NewTicker(f.interval)
	defer tick.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-tick.C:
			f.mu.Lock()
			logs := make([]*Local, 0, len(f.logs))
			for l := range f.logs {
				logs = append(logs, l)
			}
			f.mu.Unlock()
			for _, l := range logs {
				l.flush()
			}
		}
	}
}

// flushAheadLoop runs the early flushes logs ask for, one at a time.
func (f *Flusher) flushAheadLoop() {
	defer f.wg.Done()
	for {
		select {
		case <-f.stop:
			return
		case l := <-f.soon:
			l.flushAhead()
		}
	}
}

// noteUnflushed counts n bytes appended without an fsync on their
// acknowledgement path and, once flushAheadBytes have gathered, queues the
// log for an early flush (unless it is queued already).
func (l *Local) noteUnflushed(n int64) {
	if l.flusher == nil || l.unflushed.Add(n) < flushAheadBytes || !l.flushQueued.CompareAndSwap(false, true) {
		return
	}
	select {
	case l.flusher.soon <- l:
	default:
		l.flushQueued.Store(false) // the flusher is behind: ask again at the next append
	}
}

// flush is the periodic flush of one log: Sync, recovery point included.
// A log taken offline by damage is left alone; a closed one was deleted
// meanwhile.
func (l *Local) flush() {
	if l.Corruption() != nil {
		return
	}
	l.unflushed.Store(0) // before: what is appended meanwhile counts towards the next
	if err := l.Sync(); err != nil && !errors.Is(err, ErrClosed) {
		l.logger.Error("flush failed", "err", err)
	}
}

// flushAhead fsyncs everything appended to the log so far. It leaves the
// recovery point to the periodic flush: a commit wait writes no file but
// the segment.
func (l *Local) flushAhead() {
	l.unflushed.Store(0)
	l.flushQueued.Store(false)
	if l.Corruption() != nil {
		return
	}
	if err := l.Commit(l.EndOffset()).Wait(context.Background()); err != nil && !errors.Is(err, ErrClosed) {
		l.logger.Error("flush failed", "err", err)
	}
}
