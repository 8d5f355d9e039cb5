package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/wharf-mq/wharf/internal/node"
)

// saramaVersions are the Kafka versions sarama is configured for. Sarama
// picks each request's version from its configured Kafka version (only
// Produce and Fetch are clamped to the broker's ApiVersions range), so each
// entry drives a different set of request versions through the broker.
// Record batches with headers need 0.11, the floor.
var saramaVersions = []sarama.KafkaVersion{
	sarama.V0_11_0_0,
	sarama.V2_0_0_0,
	sarama.V2_8_0_0,
	sarama.V3_6_0_0,
	sarama.MaxVersion,
}

// TestSarama runs, for each configured version: ClusterAdmin CreateTopic,
// ListTopics and DescribeConfig, a SyncProducer with acks=all sending 200
// keyed messages, a partition consumer from the oldest offset reading them
// all back, and DeleteTopic.
func TestSarama(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	for _, v := range saramaVersions {
		t.Run(v.String(), func(t *testing.T) {
			t.Parallel()
			saramaRoundTrip(t, n, v)
		})
	}
}

func saramaConfig(v sarama.KafkaVersion) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = v
	cfg.ClientID = "wharf-e2e"
	cfg.Net.DialTimeout = 5 * time.Second
	cfg.Net.ReadTimeout = 10 * time.Second
	cfg.Net.WriteTimeout = 5 * time.Second
	cfg.Metadata.Retry.Max = 2
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Retry.Max = 2
	cfg.Consumer.Return.Errors = true
	return cfg
}

func saramaRoundTrip(t *testing.T, n *node.Node, v sarama.KafkaVersion) {
	addrs := []string{n.KafkaAddr()}
	cfg := saramaConfig(v)
	topic := "sarama-v" + v.String() // one topic per version; dots are legal in names

	admin, err := sarama.NewClusterAdmin(addrs, cfg)
	if err != nil {
		t.Fatalf("sarama %s: NewClusterAdmin: %v", v, err)
	}
	defer admin.Close()

	retention := "7200000"
	if err := admin.CreateTopic(topic, &sarama.TopicDetail{
		NumPartitions:     2,
		ReplicationFactor: 1,
		ConfigEntries:     map[string]*string{"retention.ms": &retention},
	}, false); err != nil {
		t.Fatalf("sarama %s: CreateTopic(%q): %v", v, topic, err)
	}

	topics, err := admin.ListTopics()
	if err != nil {
		t.Fatalf("sarama %s: ListTopics: %v", v, err)
	}
	if d, ok := topics[topic]; !ok || d.NumPartitions != 2 {
		t.Errorf("sarama %s: ListTopics()[%q] = %+v (present %v), want 2 partitions", v, topic, d, ok)
	}

	entries, err := admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic})
	if err != nil {
		t.Fatalf("sarama %s: DescribeConfig(%q): %v", v, topic, err)
	}
	found := false
	for _, e := range entries {
		if e.Name == "retention.ms" {
			found = true
			if e.Value != retention || e.Default {
				t.Errorf("sarama %s: DescribeConfig retention.ms = %q (default %v), want %q set by CreateTopic", v, e.Value, e.Default, retention)
			}
		}
	}
	if !found {
		t.Errorf("sarama %s: DescribeConfig(%q) has no retention.ms among %d entries", v, topic, len(entries))
	}

	msgs := saramaProduce(t, addrs, cfg, topic, 200)
	saramaConsume(t, addrs, cfg, topic, msgs)

	if err := admin.DeleteTopic(topic); err != nil {
		t.Fatalf("sarama %s: DeleteTopic(%q): %v", v, topic, err)
	}
	topics, err = admin.ListTopics()
	if err != nil {
		t.Fatalf("sarama %s: ListTopics after delete: %v", v, err)
	}
	if _, ok := topics[topic]; ok {
		t.Errorf("sarama %s: deleted topic %q is still listed", v, topic)
	}
}

// saramaProduce sends count keyed messages with a SyncProducer and returns
// them with the partition and offset the broker assigned.
func saramaProduce(t *testing.T, addrs []string, cfg *sarama.Config, topic string, count int) []*sarama.ProducerMessage {
	t.Helper()
	producer, err := sarama.NewSyncProducer(addrs, cfg)
	if err != nil {
		t.Fatalf("sarama %s: NewSyncProducer: %v", cfg.Version, err)
	}
	defer producer.Close()
	var msgs []*sarama.ProducerMessage
	for i := range count {
		msgs = append(msgs, &sarama.ProducerMessage{
			Topic:   topic,
			Key:     sarama.StringEncoder(fmt.Sprintf("key-%02d", i%20)),
			Value:   sarama.StringEncoder(fmt.Sprintf("value-%03d", i)),
			Headers: []sarama.RecordHeader{{Key: []byte("n"), Value: fmt.Appendf(nil, "%d", i)}},
		})
	}
	if err := producer.SendMessages(msgs); err != nil {
		if perrs, ok := err.(sarama.ProducerErrors); ok && len(perrs) > 0 {
			t.Fatalf("sarama %s: SendMessages: %d of %d failed, first: %v", cfg.Version, len(perrs), count, perrs[0].Err)
		}
		t.Fatalf("sarama %s: SendMessages: %v", cfg.Version, err)
	}
	return msgs
}

// saramaConsume reads every partition from the oldest offset and checks
// each message is the one produced at that partition and offset.
func saramaConsume(t *testing.T, addrs []string, cfg *sarama.Config, topic string, produced []*sarama.ProducerMessage) {
	t.Helper()
	byPartition := make(map[int32][]*sarama.ProducerMessage)
	for _, m := range produced {
		byPartition[m.Partition] = append(byPartition[m.Partition], m)
	}
	consumer, err := sarama.NewConsumer(addrs, cfg)
	if err != nil {
		t.Fatalf("sarama %s: NewConsumer: %v", cfg.Version, err)
	}
	defer consumer.Close()
	deadline := time.After(testTimeout)
	for _, p := range sortedKeys(byPartition) {
		want := byPartition[p]
		pc, err := consumer.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatalf("sarama %s: ConsumePartition(%q, %d, oldest): %v", cfg.Version, topic, p, err)
		}
		for i, w := range want {
			select {
			case m := <-pc.Messages():
				wantValue, _ := w.Value.Encode()
				wantKey, _ := w.Key.Encode()
				if m.Offset != w.Offset || string(m.Value) != string(wantValue) || string(m.Key) != string(wantKey) {
					t.Fatalf("sarama %s: partition %d message %d: key %q value %q offset %d, want key %q value %q offset %d",
						cfg.Version, p, i, m.Key, m.Value, m.Offset, wantKey, wantValue, w.Offset)
				}
				if len(m.Headers) != 1 || string(m.Headers[0].Key) != "n" || string(m.Headers[0].Value) != string(w.Headers[0].Value) {
					t.Fatalf("sarama %s: partition %d offset %d: headers %v, want [n=%s]", cfg.Version, p, m.Offset, m.Headers, w.Headers[0].Value)
				}
			case cerr := <-pc.Errors():
				t.Fatalf("sarama %s: partition %d after %d of %d messages: %v", cfg.Version, p, i, len(want), cerr)
			case <-deadline:
				t.Fatalf("sarama %s: partition %d: %d of %d messages before the %v deadline", cfg.Version, p, i, len(want), testTimeout)
			}
		}
		if hwm := pc.HighWaterMarkOffset(); hwm != int64(len(want)) {
			t.Errorf("sarama %s: partition %d high watermark %d, want %d", cfg.Version, p, hwm, len(want))
		}
		pc.Close()
	}
}
