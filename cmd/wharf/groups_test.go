package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wharf-mq/wharf/internal/node"
	"github.com/wharf-mq/wharf/internal/nodetest"
)

// TestGroupsResetToDatetime stops a group that has consumed a whole topic,
// resets it with --to-datetime to a time in the middle of the topic, and
// checks that the group resumes at the first record at or after that time.
// On the way: the plan changes nothing without --execute, describe shows the
// lag in records and in time, a group with live members is refused, and
// delete removes the group.
func TestGroupsResetToDatetime(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	n := nodetest.Start(t, nodetest.WithConfig(func(c *node.Config) {
		c.Groups.InitialRebalanceDelay = -1
		c.Groups.MinSessionTimeout = 500 * time.Millisecond
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const topic, group = "events", "readers"
	cl := testClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	// Record i is at base + i seconds, on partition i%2: each partition
	// holds 50 records two seconds apart.
	base := time.Now().Add(-10 * time.Minute).Truncate(time.Second)
	var recs []*kgo.Record
	for i := range 100 {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 2), Timestamp: base.Add(time.Duration(i) * time.Second), Value: []byte(fmt.Sprint(i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	consumeGroup(t, n, group, topic, 100) // commits everything, then leaves
	committedAt(t, adm, group, 50, 50)

	status, stdout, stderr := runCLI("groups", "describe", group, "--bootstrap-server", n.KafkaAddr())
	if status != 0 || !lagLine(stdout, 0, "50", "50", "0", "0s") || !lagLine(stdout, 1, "50", "50", "0", "0s") {
		t.Fatalf("describe after consuming everything: status %d\n%s%s", status, stdout, stderr)
	}

	at := base.Add(50 * time.Second) // partition 0: record 25 (t=50s); partition 1: record 25 (t=51s)
	reset := []string{"groups", "reset-offsets", group, "--topic", topic, "--to-datetime", at.Format("2006-01-02T15:04:05.000"), "--bootstrap-server", n.KafkaAddr()}
	status, stdout, stderr = runCLI(reset...)
	if status != 0 || !strings.Contains(stdout, "Dry run") || !planLine(stdout, 0, "50", "25") || !planLine(stdout, 1, "50", "25") {
		t.Fatalf("reset plan: status %d\n%s%s", status, stdout, stderr)
	}
	committedAt(t, adm, group, 50, 50) // a plan changes nothing

	status, stdout, stderr = runCLI(append(reset, "--execute")...)
	if status != 0 || !strings.Contains(stdout, "Committed new offsets for 2 partition(s)") {
		t.Fatalf("reset --execute: status %d\n%s%s", status, stdout, stderr)
	}
	committedAt(t, adm, group, 25, 25)

	status, stdout, stderr = runCLI("groups", "describe", group, "--bootstrap-server", n.KafkaAddr())
	if status != 0 || !lagLine(stdout, 0, "25", "50", "25", "") || !lagLine(stdout, 1, "25", "50", "25", "") {
		t.Fatalf("describe after the reset: status %d\n%s%s", status, stdout, stderr)
	}
	// The next record of partition 0 was written at base+50s: about 9m10s ago.
	if lt := lagTime(stdout, 0); lt < 9*time.Minute || lt > 11*time.Minute {
		t.Fatalf("lag time of partition 0 is %v, want about 9m10s\n%s", lt, stdout)
	}

	// The group resumes at the first record at or after the time.
	first := consumeGroup(t, n, group, topic, 50)
	for p, r := range first {
		if r.Offset != 25 || r.Timestamp.Before(at) || r.Timestamp.After(at.Add(time.Second)) {
			t.Errorf("partition %d resumed at offset %d written at %v, want offset 25 at or just after %v", p, r.Offset, r.Timestamp, at)
		}
	}

	// While a member is live, resets are refused.
	joined := make(chan struct{})
	live := testClient(t, n, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.HeartbeatInterval(100*time.Millisecond),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) { close(joined) }))
	select {
	case <-joined:
	case <-ctx.Done():
		t.Fatal("the live member did not join")
	}
	status, _, stderr = runCLI(append(reset, "--execute")...)
	if status != 1 || !strings.Contains(stderr, "live member") {
		t.Fatalf("reset of a group with a live member: status %d, stderr %q", status, stderr)
	}
	status, stdout, _ = runCLI("groups", "delete", group, "--bootstrap-server", n.KafkaAddr())
	if status != 1 || !strings.Contains(stdout, "NON_EMPTY_GROUP") {
		t.Fatalf("delete of a group with a live member: status %d\n%s", status, stdout)
	}
	live.Close()

	status, stdout, stderr = runCLI("groups", "list", "--bootstrap-server", n.KafkaAddr())
	if status != 0 || !regexp.MustCompile(`(?m)^readers\s+classic\s+Empty\s+consumer\s*$`).MatchString(stdout) {
		t.Fatalf("list: status %d\n%s%s", status, stdout, stderr)
	}
	status, stdout, stderr = runCLI("groups", "delete", group, "--bootstrap-server", n.KafkaAddr())
	if status != 0 {
		t.Fatalf("delete: status %d\n%s%s", status, stdout, stderr)
	}
	if _, stdout, _ = runCLI("groups", "list", "--bootstrap-server", n.KafkaAddr()); strings.Contains(stdout, group) {
		t.Fatalf("the deleted group is still listed:\n%s", stdout)
	}
}

func testClient(t *testing.T, n *node.Node, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(n.KafkaAddr()), kgo.DisableIdempotentWrite()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// consumeGroup consumes want records as a member of group, commits them,
// leaves, and returns the first record it got from each partition.
func consumeGroup(t *testing.T, n *node.Node, group, topic string, want int) map[int32]*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := testClient(t, n, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.HeartbeatInterval(100*time.Millisecond))
	first := map[int32]*kgo.Record{}
	for got := 0; got < want; {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("group %s consumed %d of %d records", group, got, want)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if first[r.Partition] == nil {
				first[r.Partition] = r
			}
			got++
		})
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()
	return first
}

func committedAt(t *testing.T, adm *kadm.Client, group string, want ...int64) {
	t.Helper()
	offsets, err := adm.FetchOffsets(context.Background(), group)
	if err != nil {
		t.Fatal(err)
	}
	for p, w := range want {
		if o, ok := offsets.Lookup("events", int32(p)); !ok || o.At != w {
			t.Fatalf("partition %d committed at %+v, want %d", p, o, w)
		}
	}
}

// lagLine finds describe's line for a partition of "events" and checks its
// columns (an empty want skips the lag time).
func lagLine(out string, p int, current, end, lag, lagTime string) bool {
	f := lineFields(out, p)
	return len(f) >= 7 && f[3] == current && f[4] == end && f[5] == lag && (lagTime == "" || f[6] == lagTime)
}

func lagTime(out string, p int) time.Duration {
	f := lineFields(out, p)
	if len(f) < 7 {
		return -1
	}
	d, _ := time.ParseDuration(f[6])
	return d
}

func planLine(out string, p int, current, next string) bool {
	f := lineFields(out, p)
	return len(f) == 5 && f[3] == current && f[4] == next
}

func lineFields(out string, p int) []string {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == "readers" && f[1] == "events" && f[2] == fmt.Sprint(p) {
			return f
		}
	}
	return nil
}
