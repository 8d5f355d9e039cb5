package jetstream

import "time"

// dedupeWindow remembers the Nats-Msg-Id of every message published within
// the stream's duplicate window, so that a retried publish is answered
// with the original's sequence instead of being stored again. It is
// rebuilt from the log's recent records when the stream opens, so
// de-duplication survives restarts.
type dedupeWindow struct {
	ids   map[string]uint64 // message id -> sequence
	order []dedupeEntry     // oldest first, for expiry
}

type dedupeEntry struct {
	id   string
	seq  uint64
	time time.Time
}

// lookup returns the sequence of an earlier message with id, if it is in
// the window.
func (d *dedupeWindow) lookup(id string) (uint64, bool) {
	seq, ok := d.ids[id]
	return seq, ok
}

func (d *dedupeWindow) add(id string, seq uint64, t time.Time) {
	if d.ids == nil {
		d.ids = map[string]uint64{}
	}
	d.ids[id] = seq
	d.order = append(d.order, dedupeEntry{id: id, seq: seq, time: t})
}

// expire forgets the ids published before now - window.
func (d *dedupeWindow) expire(now time.Time, window time.Duration) {
	cutoff := now.Add(-window)
	n := 0
	for n < len(d.order) && d.order[n].time.Before(cutoff) {
		e := d.order[n]
		if d.ids[e.id] == e.seq {
			delete(d.ids, e.id)
		}
		n++
	}
	if n > 0 {
		d.order = append(d.order[:0:0], d.order[n:]...)
	}
}
