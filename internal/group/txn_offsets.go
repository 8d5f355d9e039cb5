package group

import (
	"errors"
	"fmt"
	"time"

	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/record"
)

// Offsets committed inside a transaction (TxnOffsetCommit, KIP-98). They
// are written to __consumer_offsets at once, as a transactional batch of
// the producer, but count only when the transaction commits: the
// transaction coordinator writes a COMMIT or ABORT marker to the group's
// partition and then calls CompleteTxn, which applies the pending offsets
// or drops them. At load the markers in the log decide the same way; a
// transaction still undecided at the end of the log stays pending until
// the transaction coordinator (which finishes or times out every open
// transaction) completes it.

// TxnCommitRequest is a TxnOffsetCommit request.
type TxnCommitRequest struct {
	Group         string
	ProducerID    int64
	ProducerEpoch int16
	// Generation, MemberID and InstanceID (v3+) are checked like an
	// OffsetCommit's; an empty MemberID with a negative Generation (v0-v2)
	// is not checked.
	Generation int32
	MemberID   string
	InstanceID *string
	Offsets    []OffsetCommit
}

// TxnCommitOffsets writes offsets pending in the producer's transaction.
// The result has one error (or nil) per offset, in order.
func (c *Coordinator) TxnCommitOffsets(req TxnCommitRequest) []error {
	oc := offsetCommit{
		group:   req.Group,
		offsets: req.Offsets,
		write: func(g *group, recs []record.Record) error {
			return g.writeTxnOffsets(req.ProducerID, req.ProducerEpoch, recs)
		},
		apply: func(g *group, tp TopicPartition, o committedOffset) {
			g.addPending(req.ProducerID, tp, o)
		},
	}
	if req.MemberID == "" && req.Generation < 0 {
		oc.create = true // unchecked (v0-v2): may create the group
	} else {
		oc.member = &CommitRequest{
			Group: req.Group, Generation: req.Generation, MemberID: req.MemberID, InstanceID: req.InstanceID,
		}
	}
	return c.commitOffsets(oc)
}

// writeTxnOffsets appends offset records as a transactional batch of the
// producer.
func (g *group) writeTxnOffsets(producerID int64, producerEpoch int16, recs []record.Record) error {
	if err := g.c.store.parts()[g.partition].AppendTxnRecords(producerID, producerEpoch, recs); err != nil {
		if errors.Is(err, broker.ErrInvalidProducerEpoch) {
			return fmt.Errorf("%w: %v", ErrProducerFenced, err)
		}
		return storeError(err)
	}
	g.written = true
	return nil
}

func (g *group) addPending(producerID int64, tp TopicPartition, o committedOffset) {
	if g.pendingTxn == nil {
		g.pendingTxn = map[int64]map[TopicPartition]committedOffset{}
	}
	ps := g.pendingTxn[producerID]
	if ps == nil {
		ps = map[TopicPartition]committedOffset{}
		g.pendingTxn[producerID] = ps
	}
	ps[tp] = o
}

// hasPending reports whether a transaction has an undecided offset for tp.
func (g *group) hasPending(tp TopicPartition) bool {
	for _, ps := range g.pendingTxn {
		if _, ok := ps[tp]; ok {
			return true
		}
	}
	return false
}

// completeTxn applies (commit) or drops the producer's pending offsets.
func (g *group) completeTxn(producerID int64, commit bool) {
	ps, ok := g.pendingTxn[producerID]
	if !ok {
		return
	}
	delete(g.pendingTxn, producerID)
	if commit {
		for tp, o := range ps {
			g.setOffset(tp.Topic, tp.Partition, o)
		}
	}
}

// CompleteTxn is the broker's marker hook (broker.OnTxnMarker): once a
// COMMIT or ABORT marker of a producer is durable in a partition of
// __consumer_offsets, the producer's pending offsets of the groups there
// are applied or dropped. While the partition's groups are being loaded
// the outcome is kept and applied once they are (the load may have read
// the marker, or not). Markers of other topics are no concern of groups.
func (c *Coordinator) CompleteTxn(topic string, partition int32, producerID int64, commit bool) {
	if topic != OffsetsTopic {
		return
	}
	c.mu.Lock()
	if c.store.loads.Loading(partition) {
		c.lateMarkers[partition] = append(c.lateMarkers[partition], txnOutcome{producerID, commit})
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	for _, g := range c.snapshot() {
		if g.partition != partition {
			continue
		}
		g.mu.Lock()
		if !g.removed {
			g.completeTxn(producerID, commit)
		}
		g.mu.Unlock()
	}
}

// txnOutcome is how a producer's transaction ended.
type txnOutcome struct {
	producerID int64
	commit     bool
}

// completeTxn is CompleteTxn for the groups being loaded.
func (l *loader) completeTxn(partition int32, producerID int64, commit bool) {
	for _, g := range l.groups {
		if g.partition == partition {
			g.completeTxn(producerID, commit)
		}
	}
}

// txnOffset notes a transactional offset record read at load.
func (l *loader) txnOffset(r replayed) {
	d := r.rec
	if d.kind != keyOffsetCommit || d.tombstone {
		return
	}
	l.group(d.group).addPending(r.producerID, TopicPartition{d.topic, d.partition}, committedOffset{
		offset:      d.offset.Offset,
		leaderEpoch: d.offset.LeaderEpoch,
		metadata:    d.offset.Metadata,
		committedAt: timeFromMillis(d.offset.CommitTimestamp),
	})
}

// markUnstable fails the fetched offsets that a transaction may still
// change (OffsetFetch with RequireStable).
func (g *group) markUnstable(out []FetchedOffset) {
	for i := range out {
		if g.hasPending(TopicPartition{out[i].Topic, out[i].Partition}) {
			out[i].Offset, out[i].LeaderEpoch, out[i].Metadata = -1, -1, ""
			out[i].Err = fmt.Errorf("%w: a transaction has offsets pending for %s-%d", ErrUnstableOffsetCommit, out[i].Topic, out[i].Partition)
		}
	}
}

func timeFromMillis(ms int64) time.Time { return time.UnixMilli(ms) }
