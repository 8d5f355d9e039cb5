package crash

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestManyPartitionsUnderALowFileLimit runs the broker with an open-file
// limit of 1,024 and gives it three times as many partitions, each with
// acknowledged records, across a kill -9: every partition must keep
// serving, and every acknowledged record must come back, from segment
// files the broker opens and closes behind the clients' backs.
func TestManyPartitionsUnderALowFileLimit(t *testing.T) {
	const (
		nofile     = 1024
		topics     = 30
		partitions = 100 // per topic: 3,000 in all
	)
	h := newHarness(t)
	b := startBrokerWithFileLimit(t, h.bin, h.dataDir, filepath.Join(h.workDir, "broker-1.log"), false, nofile)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var names []string
	for i := range topics {
		name := fmt.Sprintf("many-%02d", i)
		names = append(names, name)
		if _, err := adm.CreateTopic(ctx, partitions, 1, nil, name); err != nil {
			t.Fatalf("create %s: %v\n%s", name, err, b.logTail())
		}
	}
	var records []*kgo.Record
	for _, name := range names {
		for p := range int32(partitions) {
			records = append(records, &kgo.Record{Topic: name, Partition: p, Value: []byte(partitionValue(name, p))})
		}
	}
	if err := cl.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatalf("produce to %d partitions: %v\n%s", len(records), err, b.logTail())
	}
	checkDescriptorsBelow(t, b, nofile)
	b.kill()

	b = startBrokerWithFileLimit(t, h.bin, h.dataDir, filepath.Join(h.workDir, "broker-2.log"), false, nofile)
	assign := map[string]map[int32]kgo.Offset{}
	for _, name := range names {
		assign[name] = map[int32]kgo.Offset{}
		for p := range int32(partitions) {
			assign[name][p] = kgo.NewOffset().At(0)
		}
	}
	consumer, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.ConsumePartitions(assign), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	seen := map[string]bool{}
	for len(seen) < len(records) {
		fetches := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read back %d of %d records: %v\n%s", len(seen), len(records), ctx.Err(), b.logTail())
		}
		fetches.EachError(func(topic string, p int32, err error) {
			t.Fatalf("fetch %s[%d]: %v\n%s", topic, p, err, b.logTail())
		})
		fetches.EachRecord(func(r *kgo.Record) {
			if r.Offset != 0 || string(r.Value) != partitionValue(r.Topic, r.Partition) {
				t.Fatalf("%s[%d] offset %d holds %q", r.Topic, r.Partition, r.Offset, r.Value)
			}
			seen[r.Topic+"/"+strconv.Itoa(int(r.Partition))] = true
		})
	}
	checkDescriptorsBelow(t, b, nofile)
	b.stop()
}

func partitionValue(topic string, partition int32) string {
	return fmt.Sprintf("%s/%d", topic, partition)
}

// checkDescriptorsBelow fails the test if the broker holds limit
// descriptors or more (it could not then have opened another).
func checkDescriptorsBelow(t *testing.T, b *broker, limit int) {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", b.cmd.Process.Pid))
	if err != nil {
		t.Logf("cannot count the broker's descriptors: %v", err)
		return
	}
	t.Logf("broker holds %d open descriptors (limit %d)", len(fds), limit)
	if len(fds) >= limit {
		t.Fatalf("broker holds %d descriptors, at its limit of %d", len(fds), limit)
	}
}

// TestManyQueuesUnderALowFileLimit is the AMQP side: 2,000 durable queues,
// each holding one confirmed persistent message, under ulimit -n 1024,
// across a kill -9. Each queue's message must come back, once.
func TestManyQueuesUnderALowFileLimit(t *testing.T) {
	const (
		nofile = 1024
		queues = 2000
	)
	h := newHarness(t)
	b := startBrokerWithFileLimit(t, h.bin, h.dataDir, filepath.Join(h.workDir, "broker-1.log"), true, nofile)
	conn, ch, err := dialAMQP(b.amqpAddr)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	name := func(i int) string { return fmt.Sprintf("many-q-%04d", i) }
	var confirms []*amqp.DeferredConfirmation
	for i := range queues {
		if _, err := ch.QueueDeclare(name(i), true, false, false, false, nil); err != nil {
			t.Fatalf("declare %s: %v\n%s", name(i), err, b.logTail())
		}
		dc, err := ch.PublishWithDeferredConfirm("", name(i), false, false,
			amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte(name(i))})
		if err != nil {
			t.Fatalf("publish to %s: %v\n%s", name(i), err, b.logTail())
		}
		confirms = append(confirms, dc)
	}
	for i, dc := range confirms {
		if !dc.Wait() {
			t.Fatalf("publish to %s nacked\n%s", name(i), b.logTail())
		}
	}
	conn.Close()
	checkDescriptorsBelow(t, b, nofile)
	b.kill()

	b = startBrokerWithFileLimit(t, h.bin, h.dataDir, filepath.Join(h.workDir, "broker-2.log"), true, nofile)
	conn, ch, err = dialAMQP(b.amqpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for i := range queues {
		d, ok, err := ch.Get(name(i), false)
		if err != nil || !ok || string(d.Body) != name(i) {
			t.Fatalf("basic.get from %s after the restart: ok %v, body %q, err %v\n%s", name(i), ok, d.Body, err, b.logTail())
		}
		if err := d.Ack(false); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := ch.Get(name(i), false); ok || err != nil {
			t.Fatalf("%s holds a second message (err %v)", name(i), err)
		}
	}
	checkDescriptorsBelow(t, b, nofile)
	b.stop()
}
