package mq

import (
	"slices"
	"sync"

	"github.com/wharf-mq/wharf/internal/record"
	"github.com/wharf-mq/wharf/internal/replica"
)

// Publisher publishes the messages of one client connection in batches.
// A front end reads publishes faster than it can write and fsync each one
// on its own, so a Publisher holds back two things until Flush:
//
//   - the records of stream queues: the messages published to one stream
//     since the last flush are appended as one record batch (one write,
//     one CRC, offsets in publish order), rather than a batch each;
//   - the fsync wait of every logged message: the messages of a flush
//     share one commit, registered once with the syncer, and their
//     Durabilities follow each other, so a front end confirms the run
//     with one multiple ack.
//
// Messages to other queues are enqueued at once, as by VHost.Publish,
// except that the log records of durable queues' messages are held back in
// each queue, to be written by the syncer before the fsync their confirms
// wait for (queue.logLocked): one write per queue and sync round
// rather than one per message and queue.
// Until Flush, held-back stream records are not in their streams (not
// readable, not counted); a confirm waits for the flush, so the front end
// must flush whenever it would otherwise wait: when no complete frame is
// buffered, before any other command, before blocking the reader. A
// Publisher also flushes by itself once maxPendingBytes or
// maxPendingMessages are held.
//
// A Publisher is not safe for concurrent use: one connection's reader owns
// it.
type Publisher struct {
	v   *VHost
	enc streamEncoder

	cur     *commit          // the messages since the last flush; nil: none
	streams []*pendingStream // streams with records held back, in first-use order
	targets []replica.Target // the logs cur waits for, each once
	held    int              // record bytes held back
}

// pendingStream is the record batch being built for one stream.
type pendingStream struct {
	q    *queue
	b    *record.Builder // from builders, returned at the flush
	base int64           // the first record's timestamp: the batch's base
	recs []pendingRecord // the messages in b, in case b must be split
}

// builders are the record builders of pending streams, shared by all
// publishers: a connection holds one only while it has records held back,
// so idle publishers cost no buffer.
var builders = sync.Pool{New: func() any { return new(record.Builder) }}

// pendingRecord is a message whose record waits in a pendingStream.
type pendingRecord struct {
	m   *Message
	now int64
	i   int32 // the message's index in the commit
}

// maxPendingBytes is how many bytes of stream records a Publisher holds
// back at most. A batch this size costs little to write and stays well
// under Kafka's default max.message.bytes (1 MB).
const maxPendingBytes = 256 << 10

// maxPendingMessages bounds the messages of one commit, whatever their
// queues: a front end that never stopped to flush would otherwise hold
// the fsync wait of durable queues' messages back without end.
const maxPendingMessages = 1 << 14

// NewPublisher returns a Publisher into this vhost.
func (v *VHost) NewPublisher() *Publisher { return &Publisher{v: v} }

// Publish is VHost.Publish, with stream records and the fsync wait held
// back until the next Flush (see Publisher).
func (p *Publisher) Publish(m *Message) (PublishResult, error) {
	return p.v.publish(m, p)
}

// Pending reports whether anything is held back: Flush has work to do.
func (p *Publisher) Pending() bool { return p.cur != nil }

// Flush appends the held-back stream records, one batch per stream, and
// hands the commit of every message since the last flush to the syncer
// (its forwards to other nodes wait on their own: awaitDurable).
// A stream that refuses a batch gets it in smaller batches, down to single
// messages, so that only a message it refuses on its own fails
// (ErrStreamRefused).
func (p *Publisher) Flush() {
	c := p.cur
	if c == nil {
		return
	}
	p.cur = nil
	for _, ps := range p.streams {
		if p.appendPending(ps, c) {
			p.addTarget(ps.q.stream)
		}
		ps.b.Reset()
		builders.Put(ps.b)
	}
	clear(p.streams)
	p.streams = p.streams[:0]
	p.held = 0
	if len(p.targets) == 0 {
		c.finish(nil)
	} else {
		p.v.r.awaitDurable(p.targets, c.finish)
	}
	clear(p.targets)
	p.targets = p.targets[:0]
}

// appendPending appends a stream's held-back records and reports whether
// any reached the log. Records for a stream deleted meanwhile are dropped
// without error, as a publish to it would have been confirmed.
func (p *Publisher) appendPending(ps *pendingStream, c *commit) bool {
	q := ps.q
	if len(ps.recs) == 0 || q.isDeleted() {
		return false // nothing held (the one message failed to encode), or nowhere to go
	}
	_, err := q.stream.Append(ps.b.Build(ps.base))
	switch {
	case err == nil:
		return true
	case q.isDeleted():
		return false
	case len(ps.recs) > 1:
		// A limit of the topic (max.message.bytes, segment.bytes) or a
		// record it will not take (a compacted topic wants keys) may be
		// the batch's fault rather than one message's: find out.
		return p.appendSplit(q, ps.recs, c)
	}
	p.refused(q, err)
	c.fail(ps.recs[0].i)
	return false
}

// appendSplit appends recs in two halves, each as one batch or, if the
// stream refuses it, split again, down to single messages, which fail in c
// if refused. Order is kept, and a refusal costs the others their batching
// only near it.
func (p *Publisher) appendSplit(q *queue, recs []pendingRecord, c *commit) bool {
	mid := len(recs) / 2
	appended := false
	for _, half := range [][]pendingRecord{recs[:mid], recs[mid:]} {
		var b record.Builder
		for _, r := range half {
			// Encoded once already, so this does not fail; if it did,
			// the message must not be confirmed.
			if err := p.enc.appendRecord(&b, r.m, r.now-half[0].now); err != nil {
				p.refused(q, err)
				c.fail(r.i)
			}
		}
		if b.Len() == 0 {
			continue
		}
		_, err := q.stream.Append(b.Build(half[0].now))
		switch {
		case err == nil:
			appended = true
		case q.isDeleted():
			return appended
		case len(half) > 1:
			appended = p.appendSplit(q, half, c) || appended
		default:
			p.refused(q, err)
			c.fail(half[0].i)
		}
	}
	return appended
}

func (p *Publisher) refused(q *queue, err error) {
	p.v.r.logger.Error("mq: append to stream", "queue", q.name, "vhost", p.v.name, "topic", q.stream.topic, "err", err)
}

// index is the index in the current commit the message being published
// gets if it is logged (see join).
func (p *Publisher) index() int32 {
	if p.cur == nil {
		p.cur = newCommit()
	}
	return p.cur.n
}

// addStream holds back m's record for stream queue q, timestamped now. It
// fails, holding nothing back, if m cannot be encoded.
func (p *Publisher) addStream(q *queue, m *Message, now int64) error {
	i := p.index()
	ps := p.pendingFor(q)
	before := ps.b.Size()
	if ps.b.Len() == 0 {
		ps.base = now
	}
	if err := p.enc.appendRecord(ps.b, m, now-ps.base); err != nil {
		return err
	}
	ps.recs = append(ps.recs, pendingRecord{m: m, now: now, i: i})
	p.held += ps.b.Size() - before
	return nil
}

func (p *Publisher) pendingFor(q *queue) *pendingStream {
	for _, ps := range p.streams {
		if ps.q == q {
			return ps
		}
	}
	ps := &pendingStream{q: q, b: builders.Get().(*record.Builder)}
	p.streams = append(p.streams, ps)
	return ps
}

// join adds the message being published to the current commit, waiting
// also for stores (logs it was appended to already), and returns its
// Durability. Past maxPendingBytes or maxPendingMessages it flushes.
func (p *Publisher) join(stores []replica.Target) Durability {
	d := Durability{c: p.cur, i: p.index()}
	p.cur.n++
	for _, st := range stores {
		p.addTarget(st)
	}
	if p.held >= maxPendingBytes || p.cur.n >= maxPendingMessages {
		p.Flush()
	}
	return d
}

func (p *Publisher) addTarget(st replica.Target) {
	if !slices.Contains(p.targets, st) {
		p.targets = append(p.targets, st)
	}
}
