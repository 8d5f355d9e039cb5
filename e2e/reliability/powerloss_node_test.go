package reliability

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/nodetest"
)

// Shape of the node-level power-loss load.
const (
	powerTopic      = "power"
	powerPartitions = 4
	powerProducers  = 3
	powerKafkaRate  = 4000 // records per second per producer
	powerPublishers = 2
	powerAMQPRate   = 1500 // messages per second per publisher
)

var powerQueues = []string{"power-q0", "power-q1"}

// TestPowerLossNode cuts the power under a whole running node (in-process)
// while franz-go producers (acks=all, idempotent) and amqp091-go publishers
// (confirm mode, persistent messages, durable queues) load it. Each cut
// copy is started as a new node: every acknowledged record must be at its
// offset, every confirmed message must be delivered, nothing unexpected,
// duplicated or out of order.
func TestPowerLossNode(t *testing.T) {
	if testing.Short() {
		t.Skip("runs whole nodes under load; skipped with -short")
	}
	rng := newRand(t)
	work := workDir(t)
	totals := map[string]tally{}
	for cut := 1; cut <= *brokerCutsFlag; cut++ {
		dir := filepath.Join(work, fmt.Sprintf("cut-%03d", cut))
		loadFor := time.Duration(300+rng.IntN(900)) * time.Millisecond
		kld, ald, stats := runNodeLoad(t, dir, loadFor)
		t.Logf("cut %d after %v: %s; kafka failures: %s; amqp: %s", cut, loadFor, stats, kld.failureSummary(), ald.summary())
		if len(kld.acked) == 0 || len(ald.confirmed) == 0 {
			t.Fatalf("cut %d: nothing acknowledged before the cut (kafka %d, amqp %d)", cut, len(kld.acked), len(ald.confirmed))
		}
		for _, v := range variants {
			where := fmt.Sprintf("cut %d %s", cut, v)
			k, a := checkNodeCopy(t, filepath.Join(dir, v), where, kld, ald)
			totals["kafka "+v] = totals["kafka "+v].add(k)
			totals["amqp "+v] = totals["amqp "+v].add(a)
			t.Logf("%s: kafka %s", where, k)
			t.Logf("%s: amqp %s", where, a)
		}
		if t.Failed() {
			t.Fatalf("cut %d: acknowledged data damaged; copies in %s", cut, dir)
		}
	}
	for _, k := range []string{"kafka truncated", "kafka zeroed", "amqp truncated", "amqp zeroed"} {
		t.Logf("total over %d cuts, %s: %s", *brokerCutsFlag, k, totals[k])
	}
}

// runNodeLoad runs a node on dir/live under Kafka and AMQP load for
// loadFor, cuts the power, then stops the load and the node.
func runNodeLoad(t *testing.T, dir string, loadFor time.Duration) (*kafkaLoad, *amqpLoad, cutStats) {
	t.Helper()
	live := filepath.Join(dir, "live")
	pc := startPowerCut(t, live)
	defer pc.stop()
	logs := newNodeLog(t, slog.LevelWarn)
	n := nodetest.Start(t, nodetest.WithDataDir(live), logs.option())
	segBytes := "65536" // several rolls per partition during the load
	createTopic(t, n.KafkaAddr(), powerTopic, powerPartitions, map[string]*string{"segment.bytes": &segBytes})
	declareQueues(t, nodetest.AMQPURL(n), powerQueues...)

	kld := startKafkaLoad(t, n.KafkaAddr(), powerTopic, powerProducers, powerKafkaRate, pc)
	ald := startAMQPLoad(t, nodetest.AMQPURL(n), powerQueues, powerPublishers, powerAMQPRate, pc)
	time.Sleep(loadFor) // the load itself: how long the node runs before the cut
	stats, err := pc.Cut(filepath.Join(dir, "truncated"), filepath.Join(dir, "zeroed"))
	if err != nil {
		t.Fatalf("cut: %v", err)
	}
	kld.stop()
	ald.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Close(ctx); err != nil {
		t.Errorf("close the live node: %v", err)
	}
	return kld, ald, stats
}

// checkNodeCopy starts a node on a cut copy and checks both protocols'
// data.
func checkNodeCopy(t *testing.T, dir, where string, kld *kafkaLoad, ald *amqpLoad) (kafka, amqp tally) {
	t.Helper()
	logs := newNodeLog(t, slog.LevelWarn)
	n := nodetest.Start(t, nodetest.WithDataDir(dir), logs.option())
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := n.Close(ctx); err != nil {
			t.Errorf("%s: close: %v", where, err)
		}
	}()
	for _, tp := range n.Broker().Topics() {
		for _, p := range tp.Partitions() {
			if err := p.Offline(); err != nil {
				t.Errorf("%s: %s[%d] offline after the cut: %v", where, tp.Name(), p.Index(), err)
			}
		}
	}
	kafka = checkKafka(newReporter(t, where+" kafka"), readTopic(t, n.KafkaAddr(), powerTopic), kld)
	amqp = checkAMQP(newReporter(t, where+" amqp"), ald, drainQueues(t, nodetest.AMQPURL(n), powerQueues))
	return kafka, amqp
}
