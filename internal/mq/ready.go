package mq

import "slices"

// readyQueue holds a queue's ready messages: one FIFO per priority level
// (one level for a queue without priorities), each in ascending tag order.
// The head is the front of the highest non-empty level, so higher
// priorities go first and each priority keeps its order. It also keeps the
// body bytes of the ready messages, for x-max-length-bytes.
type readyQueue struct {
	levels []deque[*entry]
	n      int
	bytes  int64
}

func newReadyQueue(levels int) readyQueue {
	return readyQueue{levels: make([]deque[*entry], max(levels, 1))}
}

// Len is the number of ready messages.
func (r *readyQueue) Len() int { return r.n }

// Bytes is the body size of the ready messages.
func (r *readyQueue) Bytes() int64 { return r.bytes }

// headLevel returns the level the head is on, -1 when empty.
func (r *readyQueue) headLevel() int {
	if r.n == 0 {
		return -1
	}
	for l := len(r.levels) - 1; l >= 0; l-- {
		if r.levels[l].Len() > 0 {
			return l
		}
	}
	return -1
}

// Head returns the next message to deliver (nil when empty) and its level.
func (r *readyQueue) Head() (*entry, int) {
	l := r.headLevel()
	if l < 0 {
		return nil, -1
	}
	return r.levels[l].Front(), l
}

// PopHead removes and returns the head.
func (r *readyQueue) PopHead() *entry {
	l := r.headLevel()
	if l < 0 {
		return nil
	}
	return r.popLevel(l)
}

// popLevel removes and returns the front of level l, which is not empty.
func (r *readyQueue) popLevel(l int) *entry {
	e := r.levels[l].PopFront()
	r.n--
	r.bytes -= e.size
	return e
}

// PushBack appends a new message at its level's end.
func (r *readyQueue) PushBack(e *entry) {
	r.levels[e.level].PushBack(e)
	r.n++
	r.bytes += e.size
}

// Requeue puts messages back at their original positions (by tag) within
// their levels.
func (r *readyQueue) Requeue(es []*entry) {
	if len(es) == 0 {
		return
	}
	slices.SortFunc(es, func(a, b *entry) int { return compareTags(a.tag, b.tag) })
	for l := range r.levels {
		var mine []*entry
		if len(r.levels) == 1 {
			mine = es
		} else {
			for _, e := range es {
				if int(e.level) == l {
					mine = append(mine, e)
				}
			}
		}
		if len(mine) > 0 {
			mergeByTag(&r.levels[l], mine)
		}
	}
	for _, e := range es {
		r.n++
		r.bytes += e.size
	}
}

// mergeByTag merges es (ascending tags) into d (ascending tags).
func mergeByTag(d *deque[*entry], es []*entry) {
	if d.Len() == 0 || es[len(es)-1].tag < d.Front().tag {
		for i := len(es) - 1; i >= 0; i-- {
			d.PushFront(es[i])
		}
		return
	}
	rest := d.Drain()
	merged := make([]*entry, 0, len(rest)+len(es))
	i, j := 0, 0
	for i < len(es) || j < len(rest) {
		if j >= len(rest) || (i < len(es) && es[i].tag < rest[j].tag) {
			merged = append(merged, es[i])
			i++
		} else {
			merged = append(merged, rest[j])
			j++
		}
	}
	d.Reset(merged)
}

// Drain removes and returns every ready message, head first.
func (r *readyQueue) Drain() []*entry {
	out := make([]*entry, 0, r.n)
	for l := len(r.levels) - 1; l >= 0; l-- {
		out = append(out, r.levels[l].Drain()...)
	}
	r.n, r.bytes = 0, 0
	return out
}

func compareTags(a, b QueueTag) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
