package broker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/wharf-mq/wharf/internal/record"
	"github.com/wharf-mq/wharf/internal/replica"
)

// metadataLogName is the directory of the log that holds the broker's own
// metadata (cluster id, topics, partition counts, configs). Kafka in KRaft
// mode keeps its metadata in a log of the same name; Wharf does the same so
// that metadata rides on the one storage primitive and inherits its
// durability and crash recovery. It is partition 0 of metadataTopic, a name
// no client may create (CreateTopic).
const (
	metadataTopic   = "__cluster_metadata"
	metadataLogName = metadataTopic + "-0"
)

// A metadata record is keyed by what it describes. On a single node
// replay's result depends on the newest record of each key only, so the
// log is compacted like any other compacted log (metadataLogConfig); in a
// cluster apply may ignore the newest, and the cleaner keeps what apply
// decided instead (metadata_origins.go; the table in docs/replication.md
// "The metadata log is compacted" says what each record type keeps). What
// is deleted is a tombstone (a null value) of its key, which compaction
// drops once delete.retention.ms has passed.
const clusterKey = "cluster"

func topicKey(name string) string { return "topic/" + name }

// topicIDHeader is the header of a topic's tombstone that holds the
// deleted topic's id: replay marks its leftover directories for removal
// (dirs.go) while the tombstone is kept.
const topicIDHeader = "topic-id"

// topicTombstone is the record of a topic's deletion.
func topicTombstone(rec topicRecord) record.Record {
	return record.Record{Key: []byte(topicKey(rec.Name)),
		Headers: []record.RecordHeader{{Key: topicIDHeader, Value: rec.ID[:]}}}
}

// deletedTopicID is the id a topic tombstone names, if it names one.
func deletedTopicID(headers []record.RecordHeader) (id [16]byte, ok bool) {
	for _, h := range headers {
		if h.Key == topicIDHeader && len(h.Value) == len(id) {
			return [16]byte(h.Value), true
		}
	}
	return id, false
}

// metadataLogConfig is the metadata log's own config: compacted, never
// deleted by retention, and with segments of segmentBytes (a compaction
// pass rewrites closed segments only).
func metadataLogConfig(segmentBytes int64) replica.Config {
	cfg := replica.DefaultConfig()
	cfg.Compact, cfg.Delete = true, false
	cfg.SegmentBytes = segmentBytes
	return cfg
}

type clusterRecord struct {
	ClusterID string `json:"cluster_id"`
}

// topicRecord is the whole durable state of a topic. A deleted topic's
// record is a tombstone (topicTombstone); logs written before that have a
// record with Deleted set instead, which replay still reads.
type topicRecord struct {
	Name       string            `json:"name"`
	ID         [16]byte          `json:"id"`
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
	Deleted    bool              `json:"deleted,omitempty"`
	// Replicas lists each partition's replicas, the preferred leader
	// first: in a cluster only (cluster.go); a single node's topics have
	// none.
	Replicas [][]int32 `json:"replicas,omitempty"`
}

// replicationFactor is the topic's replicas per partition: 1 on a single
// node.
func (r topicRecord) replicationFactor() int {
	if len(r.Replicas) == 0 {
		return 1
	}
	return len(r.Replicas[0])
}

// metadataLog writes and replays the broker's metadata records.
type metadataLog struct {
	log replica.Log
	// In a cluster, the metadata group's replica (the same log), and
	// what waits for the broker to apply a record written at an offset.
	raft         *replica.RaftLog
	applied      func(ctx context.Context, offset int64) error
	removed      func() error // this node's removal once it is fenced (fencing.go)
	writeTimeout time.Duration
	ctx          context.Context // ends when the broker closes
}

func openMetadataLog(dataDir string, self int32, cluster *ClusterConfig, segmentBytes int64, logger *slog.Logger) (*metadataLog, error) {
	dir := filepath.Join(dataDir, metadataLogName)
	if cluster != nil {
		l, err := cluster.OpenMetadataLog(dir, metadataLogConfig(segmentBytes))
		if err != nil {
			return nil, fmt.Errorf("open metadata log: %w", err)
		}
		if !l.WholeSnapshots() {
			l.Close()
			return nil, errors.New("open metadata log: its replica must install snapshots whole (replica.RaftOptions.WholeSnapshots)")
		}
		// The replay at start must see every record this node has:
		// Raft keeps no commit index on disk, so a restarted replica
		// learns from the leader what of its log is committed.
		if err := catchUpMetadata(l, cluster, self, logger); err != nil {
			l.Close()
			return nil, err
		}
		return &metadataLog{log: l, raft: l, writeTimeout: cmp.Or(cluster.WriteTimeout, 30*time.Second), ctx: context.Background()}, nil
	}
	l, err := replica.Open(dir, metadataLogConfig(segmentBytes), replica.Options{Logger: logger})
	var corrupt *replica.CorruptionError
	if errors.As(err, &corrupt) {
		return nil, fmt.Errorf("the metadata log is damaged; restore %s from a backup: %w", dir, err)
	}
	if err != nil {
		return nil, fmt.Errorf("open metadata log: %w", err)
	}
	return &metadataLog{log: l}, nil
}

// write appends one JSON record and returns once it is on disk: metadata
// changes are acknowledged to clients, so they are durable like acks=all data.
func (m *metadataLog) write(key string, value any) error {
	v, err := json.Marshal(value)
	if err != nil {
		return err
	}
	return m.writeRaw(key, v)
}

// writeRaw appends one record as write does; a nil value is a tombstone.
func (m *metadataLog) writeRaw(key string, v []byte) error {
	return m.writeBatch([]record.Record{{Key: []byte(key), Value: v}})
}

// keyValue is one metadata record to write: its value is JSON-encoded.
type keyValue struct {
	key   string
	value any
}

// writeAll writes records in one batch, as write does.
func (m *metadataLog) writeAll(kvs []keyValue) error {
	recs := make([]record.Record, len(kvs))
	for i, kv := range kvs {
		v, err := json.Marshal(kv.value)
		if err != nil {
			return err
		}
		recs[i] = record.Record{Key: []byte(kv.key), Value: v}
	}
	return m.writeBatch(recs)
}

// writeBatch appends recs as one batch and returns once it is on disk
// (in a cluster: committed and applied here).
func (m *metadataLog) writeBatch(recs []record.Record) error {
	batch := record.NewBatch(time.Now().UnixMilli(), recs)
	if m.raft != nil {
		return m.propose(batch)
	}
	res, err := m.log.Append(batch, replica.AppendOptions{})
	if err == nil {
		err = res.Commit.Wait(context.Background())
	}
	if err != nil {
		return fmt.Errorf("%w: write metadata: %v", ErrStorage, err)
	}
	return nil
}

// replay calls fn for every record in the log below its high watermark
// (its end on a single node), oldest first, with its offset. The log may
// be compacted: offsets between batches may be gone, and so may the last
// batches below the end (their records superseded), so running out of
// batches early is no error.
func (m *metadataLog) replay(fn func(off int64, r record.Record) error) (end int64, err error) {
	return m.replayBelow(m.log.HighWatermark(), fn)
}

// replayBelow is replay up to end, which is at most the high watermark.
func (m *metadataLog) replayBelow(end int64, fn func(off int64, r record.Record) error) (int64, error) {
	var fnErr error // returned as is; the log's own errors get a prefix
	_, err := readRecords(m.log.Read, m.log.StartOffset(), end, func(h record.Header, recs []record.Record) error {
		for _, r := range recs {
			if off := h.BaseOffset + int64(r.OffsetDelta); off < end {
				if fnErr = fn(off, r); fnErr != nil {
					return fnErr
				}
			}
		}
		return nil
	})
	switch {
	case fnErr != nil:
		return end, fnErr
	case err != nil:
		return end, fmt.Errorf("metadata log: %w", err)
	}
	return end, nil
}

// metadataState is what replaying the metadata log yields.
type metadataState struct {
	clusterID     string
	topics        map[string]topicRecord // live topics only
	topicIDs      map[[16]byte]bool      // their ids
	deletedTopics map[[16]byte]bool      // IDs of deleted topics
	definitions   map[string][]byte      // live keys of the definition store

	producerIDBlockEnd int64 // first producer id not yet reserved
	end                int64 // the offset the replay stopped at

	// In a cluster: the brokers registered, and the producer id block
	// each node was granted last.
	brokers        map[int32]BrokerInfo
	producerBlocks map[int32][2]int64
	// leaders are the partition leaders as they reported themselves
	// (leadership.go).
	leaders map[partitionKey]leaderRecord
	// nodes joined or removed after the cluster started, and the
	// reassignments in progress (membership.go, reassign.go).
	nodes         map[int32]nodeRecord
	reassignments map[partitionKey]reassignRecord

	// at is the offset of the record being applied, and origins, in the
	// state the cleaner replays (nil in the broker's), the record each
	// piece of the state came from (metadata_origins.go).
	at      int64
	origins map[string]origin
}

func newMetadataState() metadataState {
	return metadataState{topics: map[string]topicRecord{}, topicIDs: map[[16]byte]bool{}, deletedTopics: map[[16]byte]bool{}, definitions: map[string][]byte{},
		brokers: map[int32]BrokerInfo{}, producerBlocks: map[int32][2]int64{}, leaders: map[partitionKey]leaderRecord{}}
}

func (m *metadataLog) load() (metadataState, error) {
	st := newMetadataState()
	end, err := m.replay(st.applyAt)
	st.end = end
	return st, err
}

// loadOneVersion is load of a cluster's metadata log, which a compaction
// pass may rewrite during the replay: it replays again until no pass
// swapped segments meanwhile. One pass can drop a key's record, which the
// replay read before the swap, with its tombstone, which it would not read
// after (tombstones go by their segment's age): the key would come back.
func (m *metadataLog) loadOneVersion() (metadataState, error) {
	for {
		swaps := m.raft.Swaps()
		st, err := m.load()
		if err != nil || m.raft.Swaps() == swaps {
			return st, err
		}
	}
}

// applyAt applies the record at offset off.
func (st *metadataState) applyAt(off int64, r record.Record) error {
	st.at = off
	return st.apply(r)
}

// apply applies one metadata record to the state.
func (st *metadataState) apply(r record.Record) error {
	key, value := string(r.Key), r.Value
	switch {
	case key == clusterKey:
		var c clusterRecord
		if err := json.Unmarshal(value, &c); err != nil {
			return fmt.Errorf("metadata record %q: %w", key, err)
		}
		st.clusterID = c.ClusterID
		st.setOrigin(key)
	case strings.HasPrefix(key, "topic/") && value == nil:
		st.deleteTopic(key[len("topic/"):], r.Headers)
	case strings.HasPrefix(key, "topic/"):
		var t topicRecord
		if err := json.Unmarshal(value, &t); err != nil {
			return fmt.Errorf("metadata record %q: %w", key, err)
		}
		if live, ok := st.topics[t.Name]; ok && live.ID != t.ID {
			// Another creation of a live name: in a cluster, two nodes
			// created it at once and the first record won (a single
			// node records a deletion first).
			break
		}
		st.setOrigin(key)
		live, wasLive := st.topics[t.Name]
		if t.Deleted {
			if wasLive {
				st.forgetTopic(live.ID, live.Partitions)
			}
			delete(st.topics, t.Name)
			st.deletedTopics[t.ID] = true
			break
		}
		if !wasLive {
			st.topicIDs[t.ID] = true
			st.setOrigin(createdPiece(t.ID))
		}
		st.topics[t.Name] = t
		for p := range t.Partitions { // the record holds every partition's replicas
			st.dropOrigin(replicasPiece(t.ID, p))
		}
	case key == producerIDsKey:
		var r producerIDsRecord
		if err := json.Unmarshal(value, &r); err != nil {
			return fmt.Errorf("metadata record %q: %w", key, err)
		}
		st.producerIDBlockEnd = r.BlockEnd
		st.setOrigin(key)
	case strings.HasPrefix(key, definitionPrefix):
		k := key[len(definitionPrefix):]
		live, ok := st.definitions[k]
		switch {
		case !definitionApplies(r.Headers, live, ok): // a PutIf whose condition failed
		case value == nil && !ok: // a barrier, or a deletion of a key already gone
			st.setOriginIfNone(key) // so that a kept tombstone stays kept while tombstones are
		case value == nil:
			delete(st.definitions, k)
			st.setOrigin(key)
		default:
			st.definitions[k] = value
			st.setOrigin(key)
		}
	case strings.HasPrefix(key, brokerKeyPrefix), strings.HasPrefix(key, producerIDBlockKey):
		return st.applyCluster(key, value)
	case strings.HasPrefix(key, leaderKeyPrefix):
		return st.applyLeader(key, value)
	case strings.HasPrefix(key, nodeKeyPrefix), strings.HasPrefix(key, reassignKeyPrefix):
		return st.applyMembership(key, value)
	default:
		return errors.New("metadata log: unknown record key " + key)
	}
	return nil
}

// deleteTopic applies the tombstone of topic name.
func (st *metadataState) deleteTopic(name string, headers []record.RecordHeader) {
	id, ok := deletedTopicID(headers)
	if !ok {
		return
	}
	switch live, ok := st.topics[name]; {
	case ok && live.ID == id:
		delete(st.topics, name)
		st.forgetTopic(id, live.Partitions)
		st.setOrigin(topicKey(name))
	case !ok:
		st.setOriginIfNone(topicKey(name)) // as for a definition's tombstone
	}
	st.deletedTopics[id] = true
}

func (m *metadataLog) close() error { return m.log.Close() }
