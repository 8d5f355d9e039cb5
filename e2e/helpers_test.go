package e2e

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wharf-mq/wharf/internal/node"
	"github.com/wharf-mq/wharf/internal/nodetest"
)

// testTimeout bounds every client call a test makes. Generous for a loaded
// 2-core machine, far below the package budget so a hang fails one test
// with a message instead of the whole binary.
const testTimeout = 20 * time.Second

// startNode starts a fresh broker for one test.
func startNode(t *testing.T, opts ...nodetest.Option) *node.Node {
	t.Helper()
	return nodetest.Start(t, opts...)
}

// withAutoCreate sets auto.create.topics.enable on the node.
func withAutoCreate(on bool) nodetest.Option {
	return nodetest.WithConfig(func(c *node.Config) { c.AutoCreateTopics = &on })
}

// testContext is a context that ends with the test or after testTimeout.
func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// newFranz returns a franz-go client seeded with the node, closed at test
// end. Idempotent writes are disabled unless a test asks otherwise: the
// broker is not required to implement InitProducerId yet, and the point of
// most tests is the data path, not producer ids.
func newFranz(t *testing.T, n *node.Node, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	base := []kgo.Opt{
		kgo.SeedBrokers(n.KafkaAddr()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DisableIdempotentWrite(),
		kgo.ClientID("wharf-e2e"),
		// Fail fast instead of retrying for the default 30 s: a broker
		// error should fail the test with its message, within budget.
		kgo.RetryTimeout(10 * time.Second),
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// newAdmin returns a kadm client over its own franz-go client.
func newAdmin(t *testing.T, n *node.Node) *kadm.Client {
	t.Helper()
	return kadm.NewClient(newFranz(t, n))
}

// createTopic creates a topic through kadm and fails the test if the broker
// refuses.
func createTopic(t *testing.T, adm *kadm.Client, name string, partitions int32, configs map[string]*string) {
	t.Helper()
	resp, err := adm.CreateTopic(testContext(t), partitions, 1, configs, name)
	if err != nil {
		t.Fatalf("CreateTopic(%q, %d partitions, configs %v): %v (message %q)", name, partitions, derefMap(configs), err, resp.ErrMessage)
	}
	if resp.NumPartitions != partitions && resp.NumPartitions != -1 {
		t.Fatalf("CreateTopic(%q): response says %d partitions, asked for %d", name, resp.NumPartitions, partitions)
	}
}

// produceSync produces recs and fails the test on any record error.
func produceSync(t *testing.T, cl *kgo.Client, recs ...*kgo.Record) {
	t.Helper()
	results := cl.ProduceSync(testContext(t), recs...)
	for i, r := range results {
		if r.Err != nil {
			t.Fatalf("produce record %d of %d (topic %q, key %q, %d-byte value): %v",
				i, len(results), r.Record.Topic, r.Record.Key, len(r.Record.Value), r.Err)
		}
	}
}

// consumeN polls cl until it has want records, failing on fetch errors or
// when the deadline passes first (reporting how many arrived).
func consumeN(t *testing.T, cl *kgo.Client, want int) []*kgo.Record {
	t.Helper()
	ctx := testContext(t)
	var got []*kgo.Record
	for len(got) < want {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records before the %v deadline", len(got), want, testTimeout)
		}
		for _, fe := range fetches.Errors() {
			t.Fatalf("fetch error on %s[%d] after %d of %d records: %v", fe.Topic, fe.Partition, len(got), want, fe.Err)
		}
		got = append(got, fetches.Records()...)
	}
	if len(got) > want {
		t.Fatalf("consumed %d records, want exactly %d", len(got), want)
	}
	return got
}

// newConsumer returns a direct (non-group) consumer of topics from the start.
func newConsumer(t *testing.T, n *node.Node, topics ...string) *kgo.Client {
	t.Helper()
	return newFranz(t, n,
		kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
}

// endOffsets returns the end offset of every partition of topic.
func endOffsets(t *testing.T, adm *kadm.Client, topic string) map[int32]int64 {
	t.Helper()
	return listedOffsets(t, "ListEndOffsets", topic, func(ctx context.Context) (kadm.ListedOffsets, error) {
		return adm.ListEndOffsets(ctx, topic)
	})
}

// startOffsets returns the start (log start) offset of every partition of topic.
func startOffsets(t *testing.T, adm *kadm.Client, topic string) map[int32]int64 {
	t.Helper()
	return listedOffsets(t, "ListStartOffsets", topic, func(ctx context.Context) (kadm.ListedOffsets, error) {
		return adm.ListStartOffsets(ctx, topic)
	})
}

func listedOffsets(t *testing.T, what, topic string, list func(context.Context) (kadm.ListedOffsets, error)) map[int32]int64 {
	t.Helper()
	listed, err := list(testContext(t))
	if err != nil {
		t.Fatalf("%s(%q): %v", what, topic, err)
	}
	if err := listed.Error(); err != nil {
		var all []string
		listed.Each(func(o kadm.ListedOffset) {
			all = append(all, fmt.Sprintf("%s[%d]=%d err=%v", o.Topic, o.Partition, o.Offset, o.Err))
		})
		t.Fatalf("%s(%q): partition error: %v (all answers: %v)", what, topic, err, all)
	}
	out := make(map[int32]int64)
	listed.Each(func(o kadm.ListedOffset) {
		if o.Topic == topic {
			out[o.Partition] = o.Offset
		}
	})
	return out
}

// partitionCount asks Metadata (through kadm) how many partitions topic has.
func partitionCount(t *testing.T, adm *kadm.Client, topic string) int {
	t.Helper()
	details, err := adm.ListTopics(testContext(t), topic)
	if err != nil {
		t.Fatalf("ListTopics(%q): %v", topic, err)
	}
	d, ok := details[topic]
	if !ok {
		t.Fatalf("ListTopics(%q): topic missing from the answer (got %v)", topic, details.Names())
	}
	if d.Err != nil {
		t.Fatalf("ListTopics(%q): %v", topic, d.Err)
	}
	return len(d.Partitions)
}

func derefMap(m map[string]*string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if v == nil {
			out[k] = "<nil>"
		} else {
			out[k] = *v
		}
	}
	return out
}

func sortedKeys[V any](m map[int32]V) []int32 {
	keys := make([]int32, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}
