package broker

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/wharf-mq/wharf/internal/record"
)

// metadataWriter writes random metadata records as a cluster's nodes
// would, some on a stale view (raced topic creations, stale PutIfs,
// stale deletions, old leader epochs, refused producer id blocks),
// applying each to its view as the apply loop does.
type metadataWriter struct {
	t    *testing.T
	rng  *rand.Rand
	st   metadataState // as applied
	log  []record.Record
	dead [][16]byte // ids of deleted topics
	ends []int64    // producer id block ends seen
}

func (w *metadataWriter) write(key string, value any, headers ...record.RecordHeader) {
	w.t.Helper()
	var v []byte
	if value != nil {
		var err error
		if v, err = json.Marshal(value); err != nil {
			w.t.Fatal(err)
		}
	}
	w.writeRaw(record.Record{Key: []byte(key), Value: v, Headers: headers})
}

func (w *metadataWriter) writeRaw(r record.Record) {
	w.t.Helper()
	w.log = append(w.log, r)
	if err := w.st.apply(r); err != nil {
		w.t.Fatal(err)
	}
}

// liveTopic is a live topic at random, if any.
func (w *metadataWriter) liveTopic() (topicRecord, bool) {
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range w.st.topics {
			if !yield(n) {
				return
			}
		}
	})
	if len(names) == 0 {
		return topicRecord{}, false
	}
	return w.st.topics[names[w.rng.IntN(len(names))]], true
}

// someTopicID is a live topic's id, or now and then a deleted one's.
func (w *metadataWriter) someTopicID() ([16]byte, int32, bool) {
	if t, ok := w.liveTopic(); ok && (len(w.dead) == 0 || w.rng.IntN(4) > 0) {
		return t.ID, t.Partitions, true
	}
	if len(w.dead) == 0 {
		return [16]byte{}, 0, false
	}
	return w.dead[w.rng.IntN(len(w.dead))], 1, true
}

func (w *metadataWriter) step() {
	rng := w.rng
	switch rng.IntN(12) {
	case 0, 1: // a topic created, maybe under a live name (a raced creation, ignored)
		var id [16]byte
		for i := range id {
			id[i] = byte(rng.IntN(256))
		}
		n := int32(1 + rng.IntN(3))
		rec := topicRecord{Name: "t" + strconv.Itoa(rng.IntN(6)), ID: id, Partitions: n}
		for range n {
			rec.Replicas = append(rec.Replicas, []int32{1, 2, 3})
		}
		w.write(topicKey(rec.Name), rec)
	case 2: // a topic changed: configs, or more partitions
		if t, ok := w.liveTopic(); ok {
			t.Configs = map[string]string{"retention.ms": strconv.Itoa(rng.IntN(1000))}
			if rng.IntN(2) == 0 {
				t.Partitions++
				t.Replicas = append(slices.Clone(t.Replicas), []int32{2, 3, 1})
			}
			w.write(topicKey(t.Name), t)
		}
	case 3: // a topic deleted, now and then by a stale or an old-style record
		if t, ok := w.liveTopic(); ok {
			switch rng.IntN(5) {
			case 0:
				t.Deleted = true
				w.write(topicKey(t.Name), t)
			case 1:
				if len(w.dead) > 0 {
					t.ID = w.dead[rng.IntN(len(w.dead))]
				}
				w.writeRaw(topicTombstone(t))
			default:
				w.writeRaw(topicTombstone(t))
			}
			w.dead = append(w.dead, t.ID)
		}
	case 4: // a leader report, of any epoch, maybe racing a deletion
		if id, n, ok := w.someTopicID(); ok {
			p := int32(rng.IntN(int(n)))
			w.write(leaderKey(id, p), leaderRecord{Topic: id, Partition: p, Leader: int32(1 + rng.IntN(3)), Epoch: int32(rng.IntN(8))})
		}
	case 5: // a reassignment step
		if t, ok := w.liveTopic(); ok {
			p := int32(rng.IntN(int(t.Partitions)))
			target := []int32{int32(1 + rng.IntN(4)), 3}
			w.write(reassignKey(t.ID, p), reassignRecord{Topic: t.Name, TopicID: t.ID, Partition: p, Target: target, Done: rng.IntN(2) == 0})
		}
	case 6, 7: // a definition put, deleted, or put if (on the live value, a stale one, or none)
		key := definitionPrefix + "k" + strconv.Itoa(rng.IntN(5))
		live, ok := w.st.definitions[key[len(definitionPrefix):]]
		value := fmt.Appendf(nil, "v%d", len(w.log))
		switch rng.IntN(5) {
		case 0:
			w.writeRaw(record.Record{Key: []byte(key), Value: value})
		case 1:
			w.writeRaw(record.Record{Key: []byte(key)})
		case 2:
			w.writeRaw(record.Record{Key: []byte(definitionPrefix + barrierKey)})
		default:
			var cond []byte
			if ok && rng.IntN(3) > 0 {
				sum := sha256.Sum256(live)
				cond = sum[:]
			} else if rng.IntN(2) == 0 {
				sum := sha256.Sum256([]byte("stale"))
				cond = sum[:]
			}
			w.writeRaw(record.Record{Key: []byte(key), Value: value, Headers: []record.RecordHeader{{Key: definitionIfHeader, Value: cond}}})
		}
	case 8, 9: // a producer id block, asked for from the end or a stale one; now and then an old request
		node := int32(1 + rng.IntN(3))
		if rng.IntN(6) == 0 {
			w.write(producerIDBlockKey, producerIDBlockRecord{Node: node, Size: 100})
		} else {
			start := w.st.producerIDBlockEnd
			if len(w.ends) > 0 && rng.IntN(3) == 0 {
				start = w.ends[rng.IntN(len(w.ends))]
			}
			req := producerIDBlockRequest(node, start, int64(50+rng.IntN(100)))
			w.write(req.key, req.value)
		}
		w.ends = append(w.ends, w.st.producerIDBlockEnd)
	case 10: // a registration, ignored once its node is removed
		node := int32(1 + rng.IntN(4))
		w.write(brokerKey(node), BrokerInfo{NodeID: node, Host: "h", Port: int32(rng.IntN(100))})
	case 11: // a node joined or removed
		node := int32(4 + rng.IntN(2))
		if !w.st.nodes[node].Removed {
			w.write(nodeKeyPrefix+strconv.Itoa(int(node)), nodeRecord{NodeID: node, Addr: "a", Removed: rng.IntN(3) == 0})
		}
	}
}

// compactRecords is what a pass keeps of log[:through], the rest as it
// is: by the origins of a replay of log[:through], less the tombstones
// unless keepTombstones, as the cleaner does.
func compactRecords(t *testing.T, log []offsetRecord, through int64, keepTombstones bool) []offsetRecord {
	t.Helper()
	st := newMetadataState()
	st.origins = map[string]origin{}
	for _, r := range log {
		if r.off < through {
			if err := st.applyAt(r.off, r.rec); err != nil {
				t.Fatal(err)
			}
		}
	}
	keep := st.keepOrigins()
	var out []offsetRecord
	for _, r := range log {
		if r.off >= through {
			out = append(out, r)
			continue
		}
		if kept, ok := keep(r.off, r.rec); ok && (kept.Value != nil || keepTombstones) {
			out = append(out, offsetRecord{r.off, kept})
		}
	}
	return out
}

type offsetRecord struct {
	off int64
	rec record.Record
}

func replayRecords(t *testing.T, log []offsetRecord) clusterMetadata {
	t.Helper()
	st := newMetadataState()
	for _, r := range log {
		if err := st.applyAt(r.off, r.rec); err != nil {
			t.Fatal(err)
		}
	}
	return dumpMetadata(st)
}

// TestMetadataCompactionKeepsAppliedState: of random metadata logs with
// every kind of record a cluster writes, ignored ones among them, what a
// pass keeps of any prefix (by what apply decided), followed by the rest,
// replays to the state of the whole log, tombstones kept or not; and a
// second pass over the kept records keeps every one of them.
func TestMetadataCompactionKeepsAppliedState(t *testing.T) {
	for seed := range uint64(200) {
		w := &metadataWriter{t: t, rng: rand.New(rand.NewPCG(seed, 13)), st: newMetadataState()}
		w.write(clusterKey, clusterRecord{ClusterID: "c"})
		for range 400 {
			w.step()
		}
		log := make([]offsetRecord, len(w.log))
		for i, r := range w.log {
			log[i] = offsetRecord{int64(i), r}
		}
		want := dumpMetadata(w.st)
		if got := replayRecords(t, log); got != want {
			t.Fatalf("seed %d: the log replays to\n%v\nwant\n%v", seed, got, want)
		}
		through := int64(w.rng.IntN(len(log) + 1))
		for _, tombstones := range []bool{true, false} {
			kept := compactRecords(t, log, through, tombstones)
			if got := replayRecords(t, kept); got != want {
				t.Fatalf("seed %d, compacted below %d (tombstones kept: %v): replays to\n%v\nwant\n%v", seed, through, tombstones, got, want)
			}
			if again := compactRecords(t, kept, through, true); len(again) != len(kept) {
				t.Fatalf("seed %d, compacted below %d (tombstones kept: %v): a second pass keeps %d of %d records", seed, through, tombstones, len(again), len(kept))
			}
		}
		if testing.Short() && seed == 20 {
			break
		}
	}
}
