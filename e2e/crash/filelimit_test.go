package crash

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

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
