package jetstream

import (
	"maps"
	"slices"
	"sort"
)

// subjectIndex holds, for every subject with messages in a stream, the
// sequences and sizes of its live messages in order. It answers what
// JetStream asks by subject (per-subject limits, last message of a
// subject, pending counts of filtered consumers, whether a message is
// still there) without reading the log. It costs 12 bytes per live
// message (a sequence and a size) and about 100 bytes plus the name per
// subject; it is rebuilt from the log when the stream is opened.
type subjectIndex map[string]*subjectMsgs

// subjectMsgs are one subject's live messages, oldest first.
type subjectMsgs struct {
	seqs  []uint64
	sizes []uint32
}

func (x subjectIndex) add(subject string, seq, size uint64) {
	e := x[subject]
	if e == nil {
		e = &subjectMsgs{}
		x[subject] = e
	}
	e.seqs = append(e.seqs, seq)
	e.sizes = append(e.sizes, uint32(size))
}

// remove takes seq out of subject's messages and returns its size; ok is
// false if it was not there (removed already).
func (x subjectIndex) remove(subject string, seq uint64) (size uint64, ok bool) {
	e := x[subject]
	if e == nil {
		return 0, false
	}
	i, found := slices.BinarySearch(e.seqs, seq)
	if !found {
		return 0, false
	}
	size = uint64(e.sizes[i])
	switch {
	case len(e.seqs) == 1:
		delete(x, subject)
	case i == 0: // the usual case: the oldest goes; reslicing costs nothing
		e.seqs, e.sizes = e.seqs[1:], e.sizes[1:]
	default:
		e.seqs = slices.Delete(e.seqs, i, i+1)
		e.sizes = slices.Delete(e.sizes, i, i+1)
	}
	return size, true
}

// has reports whether seq is a live message of subject.
func (x subjectIndex) has(subject string, seq uint64) bool {
	e := x[subject]
	if e == nil {
		return false
	}
	_, found := slices.BinarySearch(e.seqs, seq)
	return found
}

// lastAmong is the newest sequence among the subjects f takes, 0 for
// none.
func (x subjectIndex) lastAmong(f filter) uint64 {
	var last uint64
	x.matching(f, func(_ string, e *subjectMsgs) { last = max(last, e.seqs[len(e.seqs)-1]) })
	return last
}

// count is how many live messages of subject have a sequence above after.
func (e *subjectMsgs) countAfter(after uint64) uint64 {
	i, found := slices.BinarySearch(e.seqs, after)
	if found {
		i++
	}
	return uint64(len(e.seqs) - i)
}

// matching calls fn once for every subject f takes, in no particular
// order. Literal filters are lookups; a wildcard walks every subject.
func (x subjectIndex) matching(f filter, fn func(subject string, e *subjectMsgs)) {
	if !slices.ContainsFunc(f, func(p string) bool { return !literal(p) }) {
		if len(f) == 0 {
			for s, e := range x {
				fn(s, e)
			}
		}
		for _, p := range f { // literal filters never repeat (checkConsumerConfig)
			if e := x[p]; e != nil {
				fn(p, e)
			}
		}
		return
	}
	for s, e := range x {
		if f.matches(s) {
			fn(s, e)
		}
	}
}

// countAfter is how many live messages f takes have a sequence above
// after.
func (x subjectIndex) countAfter(f filter, after uint64) uint64 {
	var n uint64
	x.matching(f, func(_ string, e *subjectMsgs) { n += e.countAfter(after) })
	return n
}

// lastPerSubject returns the newest sequence of every subject f takes,
// ascending.
func (x subjectIndex) lastPerSubject(f filter) []uint64 {
	var seqs []uint64
	x.matching(f, func(_ string, e *subjectMsgs) { seqs = append(seqs, e.seqs[len(e.seqs)-1]) })
	slices.Sort(seqs)
	return seqs
}

// firstAfter returns the oldest sequence above after among the subjects f
// takes, 0 if none.
func (x subjectIndex) firstAfter(f filter, after uint64) uint64 {
	var first uint64
	x.matching(f, func(_ string, e *subjectMsgs) {
		i := sort.Search(len(e.seqs), func(i int) bool { return e.seqs[i] > after })
		if i < len(e.seqs) && (first == 0 || e.seqs[i] < first) {
			first = e.seqs[i]
		}
	})
	return first
}

// counts returns the number of live messages of each subject f takes.
func (x subjectIndex) counts(f filter) map[string]uint64 {
	out := map[string]uint64{}
	x.matching(f, func(s string, e *subjectMsgs) { out[s] = uint64(len(e.seqs)) })
	return out
}

// sorted returns the subjects, sorted (for deterministic walks).
func (x subjectIndex) sorted() []string { return slices.Sorted(maps.Keys(x)) }
