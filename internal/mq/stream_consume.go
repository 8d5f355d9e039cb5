package mq

import (
	"sync"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/record"
)

// Stream consumers. Each subscription to a stream queue has a reader: a
// position in the log and a goroutine that decodes records from there and
// offers them to the consumer (TryDeliver) while it takes them. When the
// consumer refuses (no prefetch credit) the reader waits for
// Subscription.Resume; at the end of the log it waits for the log to grow
// (Stream.Notify). Nothing is removed from the log: acks, nacks and
// requeues only return credit, which the front end counts.

// streamReadBytes is how much of the log one read takes (at least a batch).
const streamReadBytes = 256 << 10

// consumeStream is Consume on a stream queue, with RabbitMQ's checks: a
// consumer prefetch (basic.qos global=false) is required (406), automatic
// acknowledgement (540) and a global prefetch (540) are refused, and
// x-stream-offset says where reading starts (default "next").
func (v *VHost) consumeStream(q *queue, s ConsumeSpec) (*Subscription, error) {
	res := resource("queue", q.name, v.name)
	switch {
	case s.Prefetch <= 0:
		return nil, errPrecondition("consumer prefetch count is not set for stream %s", res)
	case s.NoAck:
		return nil, amqpwire.Errorf(amqpwire.CodeNotImplemented, "automatic acknowledgement not supported by stream %s", res)
	case s.GlobalPrefetch > 0:
		return nil, amqpwire.Errorf(amqpwire.CodeNotImplemented, "%s does not support global qos", res)
	}
	spec, present := s.Args[StreamOffsetHeader]
	start, err := q.streamStart(spec, present)
	if err != nil {
		return nil, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.deleted {
		return nil, errNotFound("queue", q.name, v.name)
	}
	if q.exclusive || (s.Exclusive && len(q.consumers) > 0) {
		return nil, errAccessRefused("%s in exclusive use", res)
	}
	sub := &Subscription{q: q, spec: s, paused: true}
	rd := &streamReader{
		q: q, sub: sub, next: start,
		wake:   make(chan struct{}, 1),
		notify: make(chan struct{}, 1),
		stop:   make(chan struct{}),
	}
	if !v.r.startStreamReader(rd) {
		return nil, ErrClosed
	}
	sub.stream = rd
	q.consumers = append(q.consumers, sub)
	q.hadConsumer = true
	q.exclusive = s.Exclusive
	return sub, nil
}

// streamStart resolves x-stream-offset as RabbitMQ does: "first", "last"
// (the first record of the last batch written), "next" (the default: only
// what is appended from now on), an offset (an integer; clamped to the
// log), a timestamp (the first record written at or after it), or an
// interval such as "1h" or "7D" (a timestamp that long ago). Anything else
// is 406.
func (q *queue) streamStart(spec any, present bool) (int64, error) {
	st := q.stream
	if !present {
		return st.EndOffset(), nil
	}
	bad := func() (int64, error) {
		return 0, errPrecondition("invalid arg '%s' for %s: %s", StreamOffsetHeader,
			resource("queue", q.name, q.vh.name), quoted(formatValue(spec)))
	}
	switch x := spec.(type) {
	case string, []byte:
		s, _ := argString(x)
		switch s {
		case "first":
			return st.StartOffset(), nil
		case "next":
			return st.EndOffset(), nil
		case "last":
			return q.lastBatchStart()
		}
		ms, ok := parseMaxAge(s)
		if !ok {
			return bad()
		}
		return q.streamOffsetForTime(q.r.nowMs() - ms)
	case time.Time:
		return q.streamOffsetForTime(x.UnixMilli())
	}
	n, ok := argInt(spec)
	if !ok || n < 0 {
		return bad()
	}
	return min(max(n, st.StartOffset()), st.EndOffset()), nil
}

func (q *queue) streamOffsetForTime(ts int64) (int64, error) {
	off, found, err := q.stream.OffsetForTime(ts)
	if err != nil {
		return 0, errInternal("find stream offset", err)
	}
	if !found {
		return q.stream.EndOffset(), nil
	}
	return off, nil
}

// lastBatchStart is the offset "last" names: the first record of the
// batch holding the latest record (RabbitMQ's last chunk), or the end of
// an empty log.
func (q *queue) lastBatchStart() (int64, error) {
	st := q.stream
	end := st.EndOffset()
	if end <= st.StartOffset() {
		return end, nil
	}
	sl, err := st.Read(end-1, 1)
	if err != nil {
		return 0, errInternal("read stream", err)
	}
	data, err := sl.Bytes()
	sl.Release()
	if err != nil {
		return 0, errInternal("read stream", err)
	}
	h, err := record.ParseHeader(data)
	if err != nil {
		return 0, errInternal("read stream", err)
	}
	return h.BaseOffset, nil
}

// startStreamReader runs a reader's goroutine unless the registry is
// closing; Close waits for every reader to end.
func (r *Registry) startStreamReader(rd *streamReader) bool {
	r.streamMu.Lock()
	defer r.streamMu.Unlock()
	if r.streamsClosed {
		return false
	}
	r.streamReaders.Add(1)
	go rd.run()
	return true
}

// stopStreamReaders ends every reader's goroutine (Registry.Close).
func (r *Registry) stopStreamReaders() {
	r.streamMu.Lock()
	if !r.streamsClosed {
		r.streamsClosed = true
		close(r.streamStop)
	}
	r.streamMu.Unlock()
	r.streamReaders.Wait()
}

// streamReader delivers a stream to one subscription.
type streamReader struct {
	q   *queue
	sub *Subscription

	// Owned by the goroutine.
	next    int64         // offset of the next record to deliver
	pending []streamEntry // records read and decoded, not yet delivered

	wake   chan struct{} // capacity 1: Resume
	notify chan struct{} // capacity 1: the log grew
	stop   chan struct{} // closed by halt

	// deliverMu is held around each TryDeliver, so halt can wait for one
	// in progress: after Cancel returns nothing more is delivered.
	deliverMu sync.Mutex
	stopOnce  sync.Once
	stopped   bool // under deliverMu
}

type streamEntry struct {
	offset int64
	msg    *Message
}

// resume wakes the reader (Subscription.Resume). It never blocks.
func (rd *streamReader) resume() {
	select {
	case rd.wake <- struct{}{}:
	default:
	}
}

// halt stops the reader and waits for a delivery in progress. It may be
// called with the queue's lock held: the reader never takes it.
func (rd *streamReader) halt() {
	rd.stopOnce.Do(func() { close(rd.stop) })
	rd.deliverMu.Lock()
	rd.stopped = true
	rd.deliverMu.Unlock()
}

func (rd *streamReader) run() {
	r := rd.q.r
	defer r.streamReaders.Done()
	defer rd.q.stream.Unnotify(rd.notify)
	// A new subscription is paused until its first Resume.
	select {
	case <-rd.wake:
	case <-rd.stop:
		return
	case <-r.streamStop:
		return
	}
	for {
		rd.deliver()
		select {
		case <-rd.wake:
		case <-rd.notify:
		case <-rd.stop:
			return
		case <-r.streamStop:
			return
		}
	}
}

// deliver offers records until the consumer refuses one or the log has no
// more (then a wake-up on the next append is registered).
func (rd *streamReader) deliver() {
	for {
		if len(rd.pending) == 0 && !rd.fill() {
			return
		}
		e := rd.pending[0]
		d := &Delivery{Queue: rd.q.name, Tag: rd.q.r.newTag(), Message: e.msg}
		rd.deliverMu.Lock()
		ok := !rd.stopped && rd.sub.spec.Consumer.TryDeliver(d)
		rd.deliverMu.Unlock()
		if !ok {
			return
		}
		rd.pending[0] = streamEntry{}
		rd.pending = rd.pending[1:]
		rd.next = e.offset + 1
	}
}

// fill reads and decodes the records from rd.next on. It returns false at
// the end of the log, with a wake-up registered, or after a read error
// (logged; the reader tries again on the next wake-up).
func (rd *streamReader) fill() bool {
	st := rd.q.stream
	for {
		if start := st.StartOffset(); rd.next < start {
			rd.next = start // retention removed what was not read yet
		}
		if rd.next >= st.EndOffset() {
			st.Notify(rd.notify)
			if rd.next >= st.EndOffset() {
				return false
			}
			continue // appended meanwhile; the wake-up stays, harmless
		}
		sl, err := st.Read(rd.next, streamReadBytes)
		var data []byte
		if err == nil {
			data, err = sl.Bytes()
			sl.Release()
		}
		if err != nil {
			if rd.next < st.StartOffset() {
				continue // trimmed under us
			}
			rd.q.r.logger.Error("mq: read stream", "queue", rd.q.name, "vhost", rd.q.vh.name, "offset", rd.next, "err", err)
			st.Notify(rd.notify)
			return false
		}
		if rd.decode(data) {
			return true
		}
	}
}

// decode appends the records of data at or after rd.next to pending and
// reports whether there were any; past batches that hold none (control
// batches, records below rd.next) it moves rd.next on.
func (rd *streamReader) decode(data []byte) bool {
	for len(data) > 0 {
		h, err := record.ParseHeader(data)
		if err != nil || h.Size() > len(data) {
			break // a partial batch cannot come from Read; stop here
		}
		batch := data[:h.Size()]
		data = data[h.Size():]
		if h.LastOffset() < rd.next {
			continue
		}
		if h.Control() {
			rd.skipTo(h.LastOffset() + 1)
			continue
		}
		recs, err := record.Records(batch)
		if err != nil {
			rd.q.r.logger.Error("mq: skipping an unreadable stream batch", "queue", rd.q.name, "vhost", rd.q.vh.name,
				"offset", h.BaseOffset, "err", err)
			rd.skipTo(h.LastOffset() + 1)
			continue
		}
		for _, rec := range recs {
			off := h.BaseOffset + int64(rec.OffsetDelta)
			if off < rd.next {
				continue
			}
			rd.pending = append(rd.pending, streamEntry{offset: off, msg: decodeStreamMessage(rec, off, rd.q.name)})
		}
		if len(rd.pending) == 0 {
			rd.skipTo(h.LastOffset() + 1)
		}
	}
	return len(rd.pending) > 0
}

// skipTo moves the position past records that are not delivered, while
// nothing is pending before them.
func (rd *streamReader) skipTo(off int64) {
	if len(rd.pending) == 0 && off > rd.next {
		rd.next = off
	}
}

// cancelStream is Cancel for a stream consumer: it leaves the queue and
// its reader stops (after a delivery in progress).
func (s *Subscription) cancelStream() {
	q := s.q
	q.mu.Lock()
	if s.cancelled {
		q.mu.Unlock()
		return
	}
	s.cancelled = true
	for i, c := range q.consumers {
		if c == s {
			q.consumers = append(q.consumers[:i], q.consumers[i+1:]...)
			break
		}
	}
	if s.spec.Exclusive {
		q.exclusive = false
	}
	q.mu.Unlock()
	s.stream.halt()
}
