package broker

import (
	"context"
	"encoding/hex"
	"slices"
	"strconv"
	"time"

	"github.com/wharf-mq/wharf/internal/record"
	"github.com/wharf-mq/wharf/internal/replica"
)

// Compaction of a cluster's metadata log.
//
// The newest record of a key is not always the one its value came from:
// a conditional definition (PutIf) may be ignored, the first of two
// creations of a topic name wins, the highest epoch of a partition's
// leader reports wins, and a registration after its node's removal is
// ignored. Compacted to the newest record of each key, such a log would
// replay to another state. So a cluster's metadata log is compacted by
// what apply decided instead: the cleaner replays the log below the end
// of what it will rewrite, noting for every piece of the state the record
// that set it (its origin), and keeps exactly those records (tombstones
// within delete.retention.ms). A kept conditional definition is rewritten
// unconditional: its condition held when it applied, and the record it
// named may be gone. Apply is deterministic, so every replica keeps
// records that replay to the state the whole log gives, whatever the
// records after them (replayed against the same state).
//
// A piece is named by the key of the record that sets it, except for a
// live topic's creation (createdPiece), the replicas a finished
// reassignment gave a partition (replicasPiece) and the end of the
// producer id blocks (producerIDEndPiece). Records that apply reads
// another key for keep to that key's origins: a registration is ignored
// after its node's removal (kept for ever), a leader or reassignment
// record for a topic not live (its creation kept while it lives).

// origin is the record that set a piece of the metadata state.
type origin struct {
	offset int64
	// as, if not nil, is what is kept in the record's place: a record
	// that, replayed where it stands, sets the same piece.
	as *record.Record
}

// producerIDEndPiece is the piece of the end of the producer id blocks
// asked for, which the record that raised it last set.
const producerIDEndPiece = producerIDBlockKey + "-end"

// replicasPiece names the replicas of a partition a finished
// reassignment set, until a topic record sets them again.
func replicasPiece(topic [16]byte, partition int32) string {
	return "replicas/" + hex.EncodeToString(topic[:]) + "/" + strconv.Itoa(int(partition))
}

// setOrigin records that the record being applied set piece (when the
// state keeps origins: the cleaner's replay only).
func (st *metadataState) setOrigin(piece string) {
	if st.origins != nil {
		st.origins[piece] = origin{offset: st.at}
	}
}

// setOriginAs is setOrigin with the record to keep in its place.
func (st *metadataState) setOriginAs(piece string, as record.Record) {
	if st.origins != nil {
		st.origins[piece] = origin{offset: st.at, as: &as}
	}
}

// setOriginIfNone is setOrigin for a record that leaves piece absent,
// which it already was: a piece with no origin gets this one, so that a
// tombstone compaction kept (it deleted what a dropped record set) is
// kept again by the next pass, replayed where nothing precedes it.
func (st *metadataState) setOriginIfNone(piece string) {
	if _, ok := st.origins[piece]; !ok {
		st.setOrigin(piece)
	}
}

// dropOrigin records that piece is no longer set by any record.
func (st *metadataState) dropOrigin(piece string) {
	if st.origins != nil {
		delete(st.origins, piece)
	}
}

// createdPiece names the creation of a live topic: its first record is
// kept as long as the topic lives, so that in a compacted log it comes
// before every leader and reassignment record of the topic, which apply
// ignores for a topic not live (a report that raced its deletion).
func createdPiece(topic [16]byte) string { return "created/" + hex.EncodeToString(topic[:]) }

// forgetTopic drops what the metadata holds of a deleted topic beside its
// record: its id, its partitions' leaders and reassignments, whose records
// compaction can then drop too.
func (st *metadataState) forgetTopic(topic [16]byte, partitions int32) {
	delete(st.topicIDs, topic)
	st.dropOrigin(createdPiece(topic))
	for p := range partitions {
		k := partitionKey{topic, p}
		delete(st.leaders, k)
		delete(st.reassignments, k)
		st.dropOrigin(leaderKey(topic, p))
		st.dropOrigin(reassignKey(topic, p))
		st.dropOrigin(replicasPiece(topic, p))
	}
}

// retainApplied is the seglog.Retainer of a cluster's metadata log: it
// replays the log below through and keeps the records the state came
// from.
func (m *metadataLog) retainApplied(through int64) (func(int64, record.Record) (record.Record, bool), error) {
	st := newMetadataState()
	st.origins = map[string]origin{}
	if _, err := m.replayBelow(through, st.applyAt); err != nil {
		return nil, err
	}
	return st.keepOrigins(), nil
}

// keepOrigins is the compaction rule of a state replayed with origins:
// keep the records it came from, as they are to be kept.
func (st *metadataState) keepOrigins() func(int64, record.Record) (record.Record, bool) {
	keep := make(map[int64]*record.Record, len(st.origins))
	for _, o := range st.origins {
		if keep[o.offset] == nil { // a record setting two pieces has one rewrite
			keep[o.offset] = o.as
		}
	}
	return func(off int64, r record.Record) (record.Record, bool) {
		as, ok := keep[off]
		switch {
		case !ok:
			return r, false
		case as != nil:
			out := *as
			out.OffsetDelta, out.TimestampDelta = r.OffsetDelta, r.TimestampDelta
			return out, true
		}
		return withoutCondition(r), true
	}
}

// withoutCondition is r less its definitionIfHeader, if it has one.
func withoutCondition(r record.Record) record.Record {
	i := slices.IndexFunc(r.Headers, func(h record.RecordHeader) bool { return h.Key == definitionIfHeader })
	if i >= 0 {
		r.Headers = slices.Delete(slices.Clone(r.Headers), i, i+1)
	}
	return r
}

// compactClusterMetadata runs one compaction pass over a cluster's
// metadata log, by what apply decided (retainApplied), over no record
// this node has not applied yet: the apply loop reads on from where it
// is, and a compacted stretch replays right only from the log's start.
func (b *Broker) compactClusterMetadata(ctx context.Context, now time.Time) (replica.CompactStats, error) {
	b.mu.RLock()
	applied := b.appliedEnd
	b.mu.RUnlock()
	return b.meta.raft.CompactRetaining(ctx, now, applied, b.meta.retainApplied)
}
