package raft

import (
	"slices"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
)

// readCounting is a replica whose writes are kept and whose reads are
// counted; nothing else of Replica is used.
type readCounting struct {
	Replica
	log   map[uint64]*pb.Entry
	reads int
}

func (r *readCounting) Write(w *Write) (int, error) {
	for _, e := range w.Entries {
		r.log[e.GetIndex()] = e
	}
	return len(w.Entries), nil
}

func (r *readCounting) Entries(lo, hi, _ uint64) ([]*pb.Entry, error) {
	r.reads++
	var out []*pb.Entry
	for i := lo; i < hi; i++ {
		out = append(out, r.log[i])
	}
	return out, nil
}

func (r *readCounting) Apply(*pb.Entry, *pb.ConfState) error { return nil }

func entry(index, term uint64, data string) *pb.Entry {
	return &pb.Entry{Index: &index, Term: &term, Data: []byte(data)}
}

// TestEntryCacheServesWrittenEntries: Raft's reads of entries written and
// not yet applied come from memory, with the entries that replaced
// others, within maxSize; applied ones and others come from the replica.
func TestEntryCacheServesWrittenEntries(t *testing.T) {
	rep := &readCounting{log: map[uint64]*pb.Entry{}}
	c := &entryCache{Replica: rep}
	read := func(lo, hi, maxSize uint64) (terms []uint64) {
		t.Helper()
		ents, err := c.Entries(lo, hi, maxSize)
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range ents {
			if e.GetIndex() != lo+uint64(i) {
				t.Fatalf("Entries(%d, %d) returned index %d at %d", lo, hi, e.GetIndex(), i)
			}
			terms = append(terms, e.GetTerm())
		}
		return terms
	}
	var ents []*pb.Entry
	for i := uint64(1); i <= 5; i++ {
		ents = append(ents, entry(i, 1, "x"))
	}
	c.Write(&Write{Entries: ents})
	if got := read(2, 6, 1<<20); !slices.Equal(got, []uint64{1, 1, 1, 1}) || rep.reads != 0 {
		t.Errorf("written entries 2..5: terms %v, %d replica reads; want from memory", got, rep.reads)
	}
	c.Write(&Write{Entries: []*pb.Entry{entry(4, 2, "y"), entry(5, 2, "y"), entry(6, 2, "y")}})
	if got := read(3, 7, 1<<20); !slices.Equal(got, []uint64{1, 2, 2, 2}) || rep.reads != 0 {
		t.Errorf("after entries 4..6 replaced: terms %v, %d replica reads; want 1 2 2 2 from memory", got, rep.reads)
	}
	if got := read(3, 7, 1); len(got) != 1 {
		t.Errorf("maxSize 1: %d entries, want the first only", len(got))
	}
	c.Apply(entry(3, 1, "x"), nil)
	if read(3, 5, 1<<20); rep.reads != 1 {
		t.Errorf("an applied entry asked for: %d replica reads, want 1", rep.reads)
	}
	if read(4, 7, 1<<20); rep.reads != 1 {
		t.Errorf("entries not applied yet: %d replica reads, want still 1", rep.reads)
	}
	c.Write(&Write{Snapshot: &pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: new(uint64(10))}}})
	if read(4, 7, 1<<20); rep.reads != 2 {
		t.Errorf("after a snapshot: %d replica reads, want 2", rep.reads)
	}
}

// TestEntryCacheRetainsForFollowers: a leader's cache keeps the applied
// entries from the first one a follower lacks, and lets them go as the
// followers get them.
func TestEntryCacheRetainsForFollowers(t *testing.T) {
	rep := &readCounting{log: map[uint64]*pb.Entry{}}
	c := &entryCache{Replica: rep}
	read := func(lo, hi uint64, wantReads int) {
		t.Helper()
		ents, err := c.Entries(lo, hi, 1<<20)
		if err != nil || len(ents) != int(hi-lo) {
			t.Fatalf("Entries(%d, %d): %d entries, %v", lo, hi, len(ents), err)
		}
		if rep.reads != wantReads {
			t.Fatalf("Entries(%d, %d): %d replica reads in all, want %d", lo, hi, rep.reads, wantReads)
		}
	}
	var ents []*pb.Entry
	for i := uint64(1); i <= 5; i++ {
		ents = append(ents, entry(i, 1, "x"))
	}
	c.Write(&Write{Entries: ents})
	c.retainFrom(3)
	for _, e := range ents {
		c.Apply(e, nil)
	}
	read(3, 6, 0) // applied, but a follower lacks them
	read(2, 6, 1) // entry 2 every follower has
	c.retainFrom(5)
	read(4, 6, 2)
	read(5, 6, 2)
	c.retainFrom(0) // no follower to wait for
	read(5, 6, 3)
}
