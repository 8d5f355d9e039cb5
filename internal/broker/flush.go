package broker

import (
	"context"
	"errors"
	"time"

	"github.com/wharf-mq/wharf/internal/seglog"
)

// Background flushing.
//
// Whatever the fsync policy, two goroutines fsync what the acknowledgement
// path left unsynced: flushLoop every log every Config.FlushInterval, and
// flushAheadLoop, in between, any partition that has taken flushAheadBytes
// of such appends since its last flush began.
//
// The second bounds what a segment roll has to fsync. seglog fsyncs the
// segment it closes before the next append may go in (under the log's
// lock), so with only the periodic flush a roll waits for up to
// FlushInterval of writes to reach the disk: measured with one acks=1
// producer at 700-800 MB/s and 1 GiB segments, a 0.2-0.5 s stall of every
// append to the partition once every 1.3 s, a quarter of the producer's
// throughput. Flushed ahead, a roll finds at most about flushAheadBytes
// unsynced, tens of milliseconds of disk time; and the early flushes
// themselves fsync outside the log's lock, so appends go on meanwhile. The
// bytes reach the disk either way (the periodic flush would write them
// within a second); they only go in smaller, steadier pieces.

// flushAheadBytes is how many unsynced bytes a partition gathers before it
// asks for an early flush.
const flushAheadBytes = 16 << 20

// flushSoonQueue bounds the partitions waiting for an early flush; a
// partition that finds the queue full asks again at its next append.
const flushSoonQueue = 256

// flushLoop fsyncs every log every FlushInterval, and writes each log's
// recovery point (Log.Sync).
func (b *Broker) flushLoop() {
	defer b.bg.Done()
	tick := time.NewTicker(b.cfg.FlushInterval)
	defer tick.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-tick.C:
			b.forEachLog(func(p *Partition) error {
				p.unflushed.Store(0) // before: what is appended meanwhile counts towards the next
				return p.log.Sync()
			}, "flush")
		}
	}
}

// flushAheadLoop runs the early flushes partitions ask for, one at a time.
func (b *Broker) flushAheadLoop() {
	defer b.bg.Done()
	for {
		select {
		case <-b.stop:
			return
		case p := <-b.flushSoon:
			if err := p.flushAhead(); err != nil {
				b.logger.Error("flush failed", "topic", p.topic.name, "partition", p.index, "err", err)
			}
		}
	}
}

// noteUnflushed counts n bytes appended without an fsync on their
// acknowledgement path and, once flushAheadBytes have gathered, queues the
// partition for an early flush (unless it is queued already).
func (p *Partition) noteUnflushed(n int64) {
	if p.flushSoon == nil || p.unflushed.Add(n) < flushAheadBytes || !p.flushQueued.CompareAndSwap(false, true) {
		return
	}
	select {
	case p.flushSoon <- p:
	default:
		p.flushQueued.Store(false) // the flusher is behind: ask again at the next append
	}
}

// flushAhead fsyncs everything appended to the partition so far. It leaves
// the recovery point to the periodic flush: WaitDurable writes no file but
// the segment.
func (p *Partition) flushAhead() error {
	p.unflushed.Store(0)
	p.flushQueued.Store(false)
	log, err := p.online()
	if err != nil {
		return nil // offline: nothing is appended to it
	}
	if err := log.WaitDurable(context.Background(), log.EndOffset(), log.Truncations()); err != nil && !errors.Is(err, seglog.ErrClosed) {
		return err // closed: the topic was deleted meanwhile
	}
	return nil
}
