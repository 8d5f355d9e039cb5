package raft

import (
	"slices"
	"sync"

	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// With AsyncStorageWrites, etcd raft applies only entries it was told are
// durable, and forgets them from memory when it is told: every committed
// entry was read back from the replica's files (pread, then parsed) just
// to be applied, on every node, although the host had written it moments
// before. A group's entryCache keeps what the host wrote to its replica
// until it is applied, and answers Raft's reads of it (to apply it, or to
// send it to a follower) from memory. Everything else goes to the
// replica.
//
// On a leader, applied is not the end of it: an entry is applied once a
// majority has it, and the other followers ask for it after that. So a
// leader's cache keeps applied entries from the first one a follower that
// is up still lacks (retainFrom), within the same bound.

// entryCacheBytes bounds the data a group's cache holds; past it the
// oldest entries are dropped (and read from the replica if asked for).
const entryCacheBytes = 16 << 20

// entryCache is a group's Storage for Raft: its replica, with the entries
// written lately and not yet applied kept in memory.
type entryCache struct {
	Replica

	mu      sync.Mutex
	ents    []*pb.Entry // consecutive indexes, as written
	bytes   int         // of their data
	applied uint64      // the last entry applied
	retain  uint64      // applied entries from this one on stay (0: none do)
}

// Entries answers from memory when every entry of [lo, hi) is cached,
// and from the replica otherwise.
func (c *entryCache) Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	c.mu.Lock()
	if len(c.ents) > 0 && lo < hi && c.ents[0].GetIndex() <= lo && hi <= c.ents[len(c.ents)-1].GetIndex()+1 {
		from := lo - c.ents[0].GetIndex()
		ents := limitSize(c.ents[from:from+(hi-lo)], maxSize)
		c.mu.Unlock()
		return ents, nil
	}
	c.mu.Unlock()
	return c.Replica.Entries(lo, hi, maxSize)
}

// limitSize is a copy of the longest prefix of ents within maxSize bytes
// (counted as the replica counts them), at least one entry.
func limitSize(ents []*pb.Entry, maxSize uint64) []*pb.Entry {
	var size uint64
	for i, e := range ents {
		if size += uint64(len(e.GetData())) + 16; size > maxSize && i > 0 {
			return slices.Clone(ents[:i])
		}
	}
	return slices.Clone(ents)
}

// Write stores w in the replica and caches the entries it wrote, which
// replace any cached from the first one's index on; a snapshot replaces
// the whole log.
func (c *entryCache) Write(w *Write) (int, error) {
	n, err := c.Replica.Write(w)
	if err != nil {
		return n, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !etcdraft.IsEmptySnap(w.Snapshot) {
		c.dropFrom(0)
	}
	if len(w.Entries) == 0 {
		return n, nil
	}
	first := w.Entries[0].GetIndex()
	c.dropFrom(first)
	if len(c.ents) > 0 && c.ents[len(c.ents)-1].GetIndex()+1 != first {
		c.dropFrom(0) // a gap: keep the cache consecutive
	}
	for _, e := range w.Entries[:n] {
		c.ents = append(c.ents, e)
		c.bytes += len(e.GetData())
	}
	for c.bytes > entryCacheBytes && len(c.ents) > 0 {
		c.dropFirst()
	}
	return n, nil
}

// Apply applies e in the replica and drops the entries up to it from the
// cache, but those retained: Raft does not read them again to apply them.
func (c *entryCache) Apply(e *pb.Entry, cs *pb.ConfState) error {
	err := c.Replica.Apply(e, cs)
	c.mu.Lock()
	c.applied = max(c.applied, e.GetIndex())
	c.dropApplied()
	c.mu.Unlock()
	return err
}

// retainFrom keeps the applied entries from index i on, which a follower
// still lacks (0: none), and drops those before it.
func (c *entryCache) retainFrom(i uint64) {
	c.mu.Lock()
	c.retain = i
	c.dropApplied()
	c.mu.Unlock()
}

// dropApplied drops the applied entries not retained. Caller holds mu.
func (c *entryCache) dropApplied() {
	for len(c.ents) > 0 && c.ents[0].GetIndex() <= c.applied && (c.retain == 0 || c.ents[0].GetIndex() < c.retain) {
		c.dropFirst()
	}
}

// dropFirst drops the oldest cached entry. Caller holds mu.
func (c *entryCache) dropFirst() {
	c.bytes -= len(c.ents[0].GetData())
	c.ents[0] = nil
	c.ents = c.ents[1:]
}

// dropFrom drops the cached entries from index on (all for 0). Caller
// holds mu.
func (c *entryCache) dropFrom(index uint64) {
	for len(c.ents) > 0 && c.ents[len(c.ents)-1].GetIndex() >= index {
		last := len(c.ents) - 1
		c.bytes -= len(c.ents[last].GetData())
		c.ents[last] = nil
		c.ents = c.ents[:last]
	}
}
