package amqp

import (
	"slices"

	"github.com/wharf-mq/wharf/internal/mq"
)

// pendingDelivery is a delivery awaiting its ack: where the message came
// from and which consumer's prefetch it counts against.
type pendingDelivery struct {
	tag   uint64
	queue string
	qtag  mq.QueueTag
	cons  *consumer // nil for basic.get
}

// unackedSet holds a channel's unacknowledged deliveries by tag and in tag
// order, so basic.ack multiple=true settles a prefix without scanning the
// whole set. Tags settled out of order stay in order as stale entries
// until they reach the front or a compaction drops them.
type unackedSet struct {
	byTag map[uint64]pendingDelivery
	order []uint64 // ascending; may hold tags no longer in byTag
}

func (u *unackedSet) init() { u.byTag = make(map[uint64]pendingDelivery) }

func (u *unackedSet) len() int { return len(u.byTag) }

// add records a delivery; tags must be added in increasing order.
func (u *unackedSet) add(p pendingDelivery) {
	u.byTag[p.tag] = p
	u.order = append(u.order, p.tag)
}

// take removes and returns the deliveries an ack/nack/reject names: the tag
// alone, or with multiple every tag up to it (tag 0 with multiple: all).
// ok is false if the tag is not outstanding, which the caller reports as
// 406 "unknown delivery tag".
func (u *unackedSet) take(tag uint64, multiple bool) (taken []pendingDelivery, ok bool) {
	if multiple && tag == 0 {
		return u.takeAll(), true
	}
	p, ok := u.byTag[tag]
	if !ok {
		return nil, false
	}
	if !multiple {
		delete(u.byTag, tag)
		u.tidy()
		return []pendingDelivery{p}, true
	}
	i := 0
	for ; i < len(u.order) && u.order[i] <= tag; i++ {
		if q, live := u.byTag[u.order[i]]; live {
			taken = append(taken, q)
			delete(u.byTag, q.tag)
		}
	}
	u.order = u.order[i:]
	u.tidy()
	return taken, true
}

// takeAll removes and returns every delivery in tag order.
func (u *unackedSet) takeAll() []pendingDelivery {
	taken := make([]pendingDelivery, 0, len(u.byTag))
	for _, tag := range u.order {
		if p, live := u.byTag[tag]; live {
			taken = append(taken, p)
		}
	}
	clear(u.byTag)
	u.order = u.order[:0]
	return taken
}

// restore puts deliveries back (tx.rollback undoing acks).
func (u *unackedSet) restore(ps []pendingDelivery) {
	if len(ps) == 0 {
		return
	}
	for _, p := range ps {
		u.byTag[p.tag] = p
		u.order = append(u.order, p.tag)
	}
	slices.Sort(u.order)
	u.order = slices.Compact(u.order)
}

// tidy drops stale tags from the front, and compacts when stale tags in
// the middle outnumber live ones.
func (u *unackedSet) tidy() {
	for len(u.order) > 0 {
		if _, live := u.byTag[u.order[0]]; live {
			break
		}
		u.order = u.order[1:]
	}
	if len(u.order) > 2*len(u.byTag)+64 {
		live := make([]uint64, 0, 2*len(u.byTag)+16)
		for _, tag := range u.order {
			if _, ok := u.byTag[tag]; ok {
				live = append(live, tag)
			}
		}
		u.order = live
	}
}
