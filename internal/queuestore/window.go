package queuestore

import "math/bits"

// settleWindow tracks which offsets of a durable queue's messages log are
// settled. Every offset below base is settled; for offsets from base on, a
// bit per offset says whether it is. One bit per message that is still
// covered, so a queue with a stuck old message costs 1 bit per message
// after it rather than a map entry.
type settleWindow struct {
	base  int64    // lowest unsettled offset (or the end, when all are settled)
	wbase int64    // offset of bit 0 of words[0]; a multiple of 64, <= base
	words []uint64 // settled bits from wbase on
}

func newSettleWindow(start int64) settleWindow {
	return settleWindow{base: start, wbase: start &^ 63}
}

// isSettled reports whether off is settled.
func (w *settleWindow) isSettled(off int64) bool {
	if off < w.base {
		return true
	}
	i := (off - w.wbase) >> 6
	if i >= int64(len(w.words)) {
		return false
	}
	return w.words[i]&(1<<uint((off-w.wbase)&63)) != 0
}

// settle marks off settled and advances base over the settled prefix.
func (w *settleWindow) settle(off int64) {
	if off < w.base {
		return
	}
	i := (off - w.wbase) >> 6
	for int64(len(w.words)) <= i {
		w.words = append(w.words, 0)
	}
	w.words[i] |= 1 << uint((off-w.wbase)&63)
	if off == w.base {
		w.advance()
	}
}

// advance moves base past settled offsets and drops whole words below it.
func (w *settleWindow) advance() {
	for len(w.words) > 0 {
		bit := uint((w.base - w.wbase) & 63)
		rest := w.words[0] >> bit // bits from base to the end of the word
		if ones := bits.TrailingZeros64(^rest); ones < 64-int(bit) {
			w.base += int64(ones)
			return
		}
		w.base = w.wbase + 64
		w.wbase += 64
		w.words = w.words[1:]
	}
	if len(w.words) == 0 {
		w.words = nil // let a long-lived slice's array go
	}
}

// ranges calls fn for every run of settled offsets at or above base, in
// order, as [from, to).
func (w *settleWindow) ranges(fn func(from, to int64)) {
	from := int64(-1)
	for i, word := range w.words {
		for b := 0; b < 64; b++ {
			off := w.wbase + int64(i)*64 + int64(b)
			set := word&(1<<uint(b)) != 0 && off >= w.base
			switch {
			case set && from < 0:
				from = off
			case !set && from >= 0:
				fn(from, off)
				from = -1
			}
		}
	}
	if from >= 0 {
		fn(from, w.wbase+int64(len(w.words))*64)
	}
}
