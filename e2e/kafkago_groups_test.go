package e2e

import (
	"testing"
	"time"

	kafka "github.com/segmentio/kafka-go"

	"github.com/wharf-mq/wharf/internal/node"
	"github.com/wharf-mq/wharf/internal/nodetest"
)

// TestKafkaGoInitialRebalanceDelayOutlastsRebalanceTimeout: a kafka-go
// consumer group whose rebalance timeout (500 ms) is shorter than the
// broker's group.initial.rebalance.delay.ms (1.5 s) gets its first
// generation only when the whole delay has passed, as from Kafka, whose
// coordinator waits the full delay for an empty group and takes only the
// extensions for later members out of the rebalance timeout. Members that
// start within the delay (readers of one application starting together)
// then share generation 1 instead of forcing a second rebalance.
func TestKafkaGoInitialRebalanceDelayOutlastsRebalanceTimeout(t *testing.T) {
	t.Parallel()
	const (
		delay            = 1500 * time.Millisecond
		rebalanceTimeout = 500 * time.Millisecond
		topic            = "kafkago-initial-delay"
	)
	n := startNode(t, nodetest.WithConfig(func(c *node.Config) { c.Groups.InitialRebalanceDelay = delay }))
	kafkaGoCreateTopic(t, n, topic, 2)

	start := time.Now()
	cg, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID:               "kafkago-initial-delay",
		Brokers:          []string{n.KafkaAddr()},
		Topics:           []string{topic},
		RebalanceTimeout: rebalanceTimeout,
	})
	if err != nil {
		t.Fatalf("kafka.NewConsumerGroup: %v", err)
	}
	defer cg.Close()
	gen, err := cg.Next(testContext(t))
	if err != nil {
		t.Fatalf("ConsumerGroup.Next: %v", err)
	}
	if waited := time.Since(start); waited < delay {
		t.Fatalf("generation %d came after %v, before the %v initial rebalance delay ran out "+
			"(the coordinator cut it to the %v rebalance timeout)", gen.ID, waited, delay, rebalanceTimeout)
	}
	if gen.ID != 1 || len(gen.Assignments[topic]) != 2 {
		t.Fatalf("generation %d with assignments %v, want generation 1 with both partitions", gen.ID, gen.Assignments)
	}
}
