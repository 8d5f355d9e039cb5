package raft

import (
	"context"
	"errors"

	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// Snapshots.
//
// A leader sends a snapshot when a follower needs entries its log no
// longer has. In etcd raft the snapshot is a message (MsgSnap) that the
// follower installs whole; here it is only the offer: its metadata names
// the last entry it covers, and its data (the replica's business) names
// the records it stands for. The records themselves travel beside Raft:
//
//  1. The leader's Raft emits MsgSnap; the host sends it and at once
//     reports the snapshot as failed to Raft, which then offers it again
//     at every heartbeat until the follower has caught up.
//  2. The follower's host asks its replica (PrepareSnapshot) whether the
//     data is staged. If not, it drops the offer and asks the leader for
//     the data from the offset the replica names (KindSnapshotRequest).
//  3. The leader's host starts one sender per follower and group, which
//     streams the data in chunks (KindSnapshotChunk) through the
//     transport's Stream, waiting for room rather than dropping; the
//     follower's replica stages them.
//  4. Once the data is staged the next offer goes to Raft, which hands
//     the snapshot back in a Ready to install, and the follower
//     acknowledges it like any append.
//
// A lost chunk, request or offer only delays this: the next offer asks
// again from where the staged data ends.

// snapshotChunkBytes is about how much data a chunk carries.
const snapshotChunkBytes = 1 << 20

// snapshotRequest is the last request a follower sent for a group.
type snapshotRequest struct {
	index, term uint64
	offset      int64
	tick        int64
}

// snapshotOffered reports the snapshot just sent to a follower as failed,
// so that Raft offers it again at the next heartbeat until the follower
// has it (step 1). Caller holds g.mu.
func (h *Host) snapshotOffered(g *Group, m *pb.Message) {
	g.rn.ReportSnapshot(m.GetTo(), etcdraft.SnapshotFailure)
}

// snapshotStaged reports whether an offer m from node from may go to
// Raft; if the data is not staged it asks the leader for it (step 2),
// at most once a tick for the same data. Caller holds g.mu.
func (h *Host) snapshotStaged(g *Group, from uint64, m *pb.Message) bool {
	s := m.GetSnapshot()
	offset, complete, err := g.rep.PrepareSnapshot(s)
	if err != nil {
		h.logger.Warn("preparing for a snapshot failed", "group", g.id, "err", err)
		return false
	}
	if complete {
		return true
	}
	req := snapshotRequest{index: s.GetMetadata().GetIndex(), term: s.GetMetadata().GetTerm(), offset: offset, tick: h.ticks}
	if req != g.snapRequest {
		g.snapRequest = req
		h.send(from, Envelope{Kind: KindSnapshotRequest, Group: g.id, Index: req.index, Term: req.term, Offset: offset})
	}
	return false
}

// startSnapshotSender streams the data a follower asked for (step 3),
// unless a sender for that follower and group is running. Caller holds
// g.mu.
func (h *Host) startSnapshotSender(g *Group, to uint64, req *Envelope) {
	if h.cfg.Transport == nil {
		return
	}
	key := senderKey{group: g.id, to: to}
	h.mu.Lock()
	if h.senders[key] || h.closed {
		h.mu.Unlock()
		return
	}
	h.senders[key] = true
	h.wg.Add(1)
	h.mu.Unlock()
	index, term, offset := req.Index, req.Term, req.Offset
	go func() {
		defer h.wg.Done()
		err := g.rep.SnapshotData(index, term, offset, func(off int64, data []byte) error {
			return h.cfg.Transport.Stream(h.ctx, to, []Envelope{{
				Kind: KindSnapshotChunk, Group: g.id, Index: index, Term: term, Offset: off, Data: data,
			}})
		})
		if err != nil && !errors.Is(err, context.Canceled) {
			h.logger.Debug("snapshot sender stopped", "group", g.id, "to", to, "err", err)
		}
		h.mu.Lock()
		delete(h.senders, key)
		h.mu.Unlock()
	}()
}
