package jetstream

import (
	"container/heap"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"time"
)

// consumer is one consumer of a stream: a position in it, the deliveries
// awaiting acknowledgement, and (for a pull consumer) the requests
// waiting for messages. Its state is guarded by its stream's mutex; a
// goroutine of its own (consumer_deliver.go) reads the log and delivers.
type consumer struct {
	s       *stream
	name    string
	id      string
	created time.Time

	// Guarded by s.mu.
	cfg    ConsumerConfig
	filter filter
	// cursor: every message up to it was considered for a first
	// delivery. lps are the sequences a last-per-subject consumer
	// delivers first (ascending, all at or below cursor).
	cursor uint64
	lps    []uint64
	// npending is how many live messages the filter takes are still to
	// be delivered a first time (num_pending).
	npending uint64
	// The last delivery (delivered) and the ack floor, as consumer and
	// stream sequences.
	dseq, dsseq    uint64
	floorC, floorS uint64
	lastDelivery   time.Time
	// pending are the deliveries awaiting acknowledgement, by stream
	// sequence; rdc the delivery counts of those delivered more than
	// once; redeliver those due again, ascending; timers their ack
	// deadlines.
	pending    map[uint64]*pendingAck
	rdc        map[uint64]uint64
	redeliver  []uint64
	timers     deadlines
	waiting    []*pullRequest
	lastActive time.Time
	lastBeat   time.Time // the last push heartbeat or delivery
	dirty      bool      // state changed since last written
	removed    bool      // deleted: its state is not written any more
	halted     bool      // its delivery goroutine stopped (or never starts)

	// Owned by the delivery goroutine.
	out     Outbox
	ahead   []*Message          // read from the log past cursor
	fetched map[uint64]*Message // redeliveries and last-per-subject messages read
	wake    chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

// pendingAck is a delivery awaiting its acknowledgement.
type pendingAck struct {
	cseq     uint64
	sent     time.Time
	deadline time.Time
	subject  string // "" until known (after a restart)
}

func newConsumer(s *stream, cfg ConsumerConfig, id string, created time.Time) *consumer {
	name := cfg.Durable
	if name == "" {
		name = cfg.Name
	}
	return &consumer{
		s:          s,
		name:       name,
		id:         id,
		created:    created,
		cfg:        cfg,
		filter:     cfg.filter(),
		pending:    map[uint64]*pendingAck{},
		rdc:        map[uint64]uint64{},
		lastActive: time.Now(),
		fetched:    map[uint64]*Message{},
		wake:       make(chan struct{}, 1),
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
	}
}

// persistent reports whether the consumer's definition and state are
// kept across restarts: all but those asking for memory storage (nats.go's
// ordered consumers), as nats-server keeps them. Ephemeral consumers
// persist too, and a restart gives them their inactive threshold again.
func (c *consumer) persistent() bool { return !c.cfg.MemoryStorage }

// startLocked positions a new consumer by its deliver policy.
func (c *consumer) startLocked() error {
	s := c.s
	switch c.cfg.DeliverPolicy {
	case DeliverAll:
		c.cursor = s.first - 1
	case DeliverLast:
		c.cursor = s.last
		if last := s.subjects.lastAmong(c.filter); last > 0 {
			c.cursor = last - 1
		}
	case DeliverNew:
		c.cursor = s.last
	case DeliverByStartSequence:
		c.cursor = min(c.cfg.OptStartSeq-1, s.last)
	case DeliverByStartTime:
		off, found, err := s.log.OffsetForTime(c.cfg.OptStartTime.UnixMilli())
		if err != nil {
			return err
		}
		c.cursor = s.last
		if found {
			c.cursor = seqOf(off) - 1
		}
	case DeliverLastPerSubject:
		c.lps = s.subjects.lastPerSubject(c.filter)
		c.cursor = s.last
	}
	c.cursor = max(c.cursor, s.first-1)
	c.dsseq, c.floorS = c.cursor, c.cursor
	if len(c.lps) > 0 {
		c.dsseq, c.floorS = c.lps[0]-1, c.lps[0]-1
	}
	c.countPendingLocked()
	c.dirty = true
	return nil
}

// countPendingLocked sets npending from the stream's index.
func (c *consumer) countPendingLocked() {
	c.npending = c.s.subjects.countAfter(c.filter, c.cursor) + uint64(len(c.lps))
}

// noteStoredLocked hears of a message the stream stored.
func (c *consumer) noteStoredLocked(m *Message) {
	if m.Seq > c.cursor && c.filter.matches(m.Subject) {
		c.npending++
		c.signal()
	}
}

// noteRemovedLocked hears of a message that left the stream.
func (c *consumer) noteRemovedLocked(seq uint64, subject string) {
	if !c.filter.matches(subject) {
		return
	}
	if seq > c.cursor {
		c.npending--
	} else if i, found := slices.BinarySearch(c.lps, seq); found {
		c.lps = slices.Delete(c.lps, i, i+1)
		c.npending--
	}
}

// purgedLocked moves the consumer past messages a purge removed below
// first, as nats-server does: its position and floor follow, and their
// pending deliveries are forgotten.
func (c *consumer) purgedLocked(first uint64) {
	if c.cursor < first-1 {
		c.cursor = first - 1
		if c.dsseq < c.cursor {
			c.dsseq = c.cursor
		}
	}
	c.lps = slices.DeleteFunc(c.lps, func(seq uint64) bool { return seq < first })
	for seq := range c.pending {
		if seq < first {
			delete(c.pending, seq)
			delete(c.rdc, seq)
		}
	}
	if c.floorS < first-1 {
		c.floorS = first - 1
		if len(c.pending) == 0 {
			c.floorC = c.dseq
		}
	}
	c.countPendingLocked()
	c.dirty = true
	c.signal()
}

// needsLocked reports whether the consumer still has to deliver or see
// acknowledged a live message (interest retention).
func (c *consumer) needsLocked(seq uint64, subject string) bool {
	if !c.filter.matches(subject) {
		return false
	}
	if seq > c.cursor || c.pending[seq] != nil {
		return true
	}
	_, found := slices.BinarySearch(c.lps, seq)
	return found
}

// signal wakes the delivery goroutine.
func (c *consumer) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// ackWait is how long a delivery made for the n-th time waits for its
// acknowledgement: the backoff's n-th value (its last one beyond), or
// ack_wait.
func (c *consumer) ackWait(n uint64) time.Duration {
	if b := c.cfg.BackOff; len(b) > 0 {
		return b[min(int(n)-1, len(b)-1)]
	}
	return c.cfg.AckWait
}

// maxAckPendingReached reports whether no new message may go out until
// some are acknowledged.
func (c *consumer) maxAckPendingReached() bool {
	return c.cfg.AckPolicy != AckNone && c.cfg.MaxAckPending > 0 && len(c.pending) >= c.cfg.MaxAckPending
}

// inactiveLocked reports whether a consumer with an inactive threshold
// has gone unused that long: a push consumer nobody subscribes to, a pull
// consumer with no request.
func (c *consumer) inactiveLocked(now time.Time) bool {
	if c.cfg.InactiveThreshold <= 0 || c.out == nil {
		return false
	}
	if c.cfg.push() {
		if c.out.Interest(c.cfg.DeliverSubject) {
			c.lastActive = now
			return false
		}
	} else if len(c.waiting) > 0 {
		c.lastActive = now
		return false
	}
	return now.Sub(c.lastActive) > c.cfg.InactiveThreshold
}

// ConsumerInfo is CONSUMER.INFO's answer, nats-server's JSON.
type ConsumerInfo struct {
	Stream         string         `json:"stream_name"`
	Name           string         `json:"name"`
	Created        time.Time      `json:"created"`
	Config         ConsumerConfig `json:"config"`
	Delivered      SequenceInfo   `json:"delivered"`
	AckFloor       SequenceInfo   `json:"ack_floor"`
	NumAckPending  int            `json:"num_ack_pending"`
	NumRedelivered int            `json:"num_redelivered"`
	NumWaiting     int            `json:"num_waiting"`
	NumPending     uint64         `json:"num_pending"`
	Cluster        *ClusterInfo   `json:"cluster,omitempty"`
	PushBound      bool           `json:"push_bound,omitempty"`
	TimeStamp      time.Time      `json:"ts"`
}

// SequenceInfo is a consumer and a stream sequence, with when.
type SequenceInfo struct {
	Consumer uint64     `json:"consumer_seq"`
	Stream   uint64     `json:"stream_seq"`
	Last     *time.Time `json:"last_active,omitempty"`
}

func (c *consumer) infoLocked() *ConsumerInfo {
	info := &ConsumerInfo{
		Stream:         c.s.name,
		Name:           c.name,
		Created:        c.created,
		Config:         cloneConsumerConfig(c.cfg),
		Delivered:      SequenceInfo{Consumer: c.dseq, Stream: c.dsseq},
		AckFloor:       SequenceInfo{Consumer: c.floorC, Stream: c.floorS},
		NumAckPending:  len(c.pending),
		NumRedelivered: len(c.rdc),
		NumWaiting:     len(c.waiting),
		NumPending:     c.npending,
		Cluster:        &ClusterInfo{Leader: c.s.svc.cfg.ServerName},
		TimeStamp:      time.Now().UTC(),
	}
	if !c.lastDelivery.IsZero() {
		t := c.lastDelivery.UTC()
		info.Delivered.Last = &t
	}
	if c.cfg.push() && c.out != nil {
		info.PushBound = c.out.Interest(c.cfg.DeliverSubject)
	}
	return info
}

// consumerState is a consumer's persisted state.
type consumerState struct {
	Cursor      uint64                  `json:"cursor"`
	LPS         []uint64                `json:"lps,omitempty"`
	Delivered   [2]uint64               `json:"delivered"` // consumer, stream
	AckFloor    [2]uint64               `json:"ack_floor"` // consumer, stream
	Pending     map[string]pendingState `json:"pending,omitempty"`
	Redelivered map[string]uint64       `json:"redelivered,omitempty"`
}

type pendingState struct {
	CSeq uint64 `json:"c"`
	Sent int64  `json:"t"` // ns
}

// stateRecordLocked returns the consumer's state record if it changed
// since the last one, and marks it written.
func (c *consumer) stateRecordLocked() (stateRecord, bool) {
	if !c.dirty || c.removed || !c.persistent() {
		return stateRecord{}, false
	}
	c.dirty = false
	st := consumerState{
		Cursor:    c.cursor,
		LPS:       c.lps,
		Delivered: [2]uint64{c.dseq, c.dsseq},
		AckFloor:  [2]uint64{c.floorC, c.floorS},
	}
	if len(c.pending) > 0 {
		st.Pending = make(map[string]pendingState, len(c.pending))
		for seq, p := range c.pending {
			st.Pending[strconv.FormatUint(seq, 10)] = pendingState{CSeq: p.cseq, Sent: p.sent.UnixNano()}
		}
	}
	if len(c.rdc) > 0 {
		st.Redelivered = make(map[string]uint64, len(c.rdc))
		for seq, n := range c.rdc {
			st.Redelivered[strconv.FormatUint(seq, 10)] = n
		}
	}
	b, _ := json.Marshal(st)
	return stateRecord{key: consumerStateKey(c.id), value: b}, true
}

// restoreLocked takes up a consumer's persisted state.
func (c *consumer) restoreLocked(st consumerState) {
	s := c.s
	c.cursor = min(st.Cursor, s.last)
	c.lps = st.LPS
	c.dseq, c.dsseq = st.Delivered[0], st.Delivered[1]
	c.floorC, c.floorS = st.AckFloor[0], st.AckFloor[1]
	for k, p := range st.Pending {
		seq, err := strconv.ParseUint(k, 10, 64)
		if err != nil {
			continue
		}
		sent := time.Unix(0, p.Sent)
		c.pending[seq] = &pendingAck{cseq: p.CSeq, sent: sent}
	}
	for k, n := range st.Redelivered {
		if seq, err := strconv.ParseUint(k, 10, 64); err == nil {
			c.rdc[seq] = n
		}
	}
	for seq, p := range c.pending {
		p.deadline = p.sent.Add(c.ackWait(c.rdc[seq] + 1))
		heap.Push(&c.timers, deadline{at: p.deadline, seq: seq})
	}
	c.countPendingLocked()
}

// fillSubjects learns the subjects of deliveries pending since before a
// restart (an acknowledgement under work queue retention removes the
// message by subject), dropping those the stream no longer holds.
func (c *consumer) fillSubjects() {
	s := c.s
	s.mu.Lock()
	seqs := slices.Collect(maps.Keys(c.pending))
	s.mu.Unlock()
	for _, seq := range seqs {
		m, err := readMessage(s.log, s.name, seq)
		if err != nil {
			s.svc.log.Error("jetstream: read a pending message", "stream", s.name, "consumer", c.name, "seq", seq, "err", err)
			continue
		}
		s.mu.Lock()
		if p := c.pending[seq]; p != nil {
			if m == nil || !s.subjects.has(m.Subject, seq) {
				delete(c.pending, seq)
				delete(c.rdc, seq)
			} else {
				p.subject = m.Subject
			}
		}
		s.mu.Unlock()
	}
}

// deadline is when a pending delivery is due again.
type deadline struct {
	at  time.Time
	seq uint64
}

// deadlines is a min-heap of ack deadlines. Entries go stale when their
// delivery is acknowledged or its deadline moves; they are checked
// against pending when they come up.
type deadlines []deadline

func (d deadlines) Len() int           { return len(d) }
func (d deadlines) Less(i, j int) bool { return d[i].at.Before(d[j].at) }
func (d deadlines) Swap(i, j int)      { d[i], d[j] = d[j], d[i] }
func (d *deadlines) Push(x any)        { *d = append(*d, x.(deadline)) }
func (d *deadlines) Pop() any {
	old := *d
	x := old[len(old)-1]
	*d = old[:len(old)-1]
	return x
}
