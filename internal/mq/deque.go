package mq

// deque is a ring buffer of values, for a queue's ready messages: pushes at
// both ends, pops at the front, indexed access for merging and paging.
type deque[T any] struct {
	buf  []T
	head int
	n    int
}

func (d *deque[T]) Len() int { return d.n }

// At returns the i-th value from the front.
func (d *deque[T]) At(i int) T { return d.buf[(d.head+i)&(len(d.buf)-1)] }

func (d *deque[T]) Front() T { return d.buf[d.head] }

func (d *deque[T]) PushBack(v T) {
	d.grow()
	d.buf[(d.head+d.n)&(len(d.buf)-1)] = v
	d.n++
}

func (d *deque[T]) PushFront(v T) {
	d.grow()
	d.head = (d.head - 1) & (len(d.buf) - 1)
	d.buf[d.head] = v
	d.n++
}

func (d *deque[T]) PopFront() T {
	var zero T
	v := d.buf[d.head]
	d.buf[d.head] = zero
	d.head = (d.head + 1) & (len(d.buf) - 1)
	d.n--
	if d.n == 0 {
		d.head = 0
	}
	d.maybeShrink()
	return v
}

// Drain removes and returns every value, front first.
func (d *deque[T]) Drain() []T {
	out := make([]T, d.n)
	for i := range out {
		out[i] = d.At(i)
	}
	*d = deque[T]{}
	return out
}

// Reset replaces the contents with vs (front first), taking ownership.
func (d *deque[T]) Reset(vs []T) {
	*d = deque[T]{}
	for _, v := range vs {
		d.PushBack(v)
	}
}

// grow doubles the buffer when full; its length stays a power of two so
// indexes wrap with a mask.
func (d *deque[T]) grow() {
	if d.n < len(d.buf) {
		return
	}
	size := 2 * len(d.buf)
	if size == 0 {
		size = 8
	}
	d.resize(size)
}

// maybeShrink halves a mostly empty large buffer, so a queue that once held
// a million messages does not keep their slots.
func (d *deque[T]) maybeShrink() {
	if len(d.buf) > 1024 && d.n < len(d.buf)/4 {
		d.resize(len(d.buf) / 2)
	}
}

func (d *deque[T]) resize(size int) {
	buf := make([]T, size)
	for i := 0; i < d.n; i++ {
		buf[i] = d.At(i)
	}
	d.buf, d.head = buf, 0
}
