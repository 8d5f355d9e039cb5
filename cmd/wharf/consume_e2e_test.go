package main

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// consume fails at once, with a line naming it, on a topic, partition or
// offset that does not exist; produce does the same for a partition, and
// for a topic the broker does not create.
func TestConsumeAndProduceFailFastOnWhatDoesNotExist(t *testing.T) {
	s := startServer(t, wharfBinary(t), "--auto-create-topics=false")
	s.mustWharf(t, "", "topics", "create", "two", "--partitions", "2")
	s.mustWharf(t, "a\nb\nc\n", "produce", "two", "--partition", "1")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"consume", "nosuch"}, "topic nosuch does not exist"},
		{[]string{"consume", "two", "--partition", "2"}, "topic two has no partition 2: its 2 partition(s) are numbered from 0"},
		{[]string{"consume", "two", "--partition", "1", "--offset", "4"}, "two[1] has no offset 4: its records are at offsets 0 to 2"},
		{[]string{"consume", "two", "--partition", "0", "--offset", "1"}, "two[0] has no offset 1: it holds no records"},
		{[]string{"consume", "two", "--offset", "3"}, "two[0] has no offset 3"},
		{[]string{"produce", "nosuch"}, "topic nosuch does not exist, and the broker does not create topics on first use"},
		{[]string{"produce", "two", "--partition", "5"}, "topic two has no partition 5"},
	}
	for _, c := range cases {
		start := time.Now()
		r := s.wharf(t, "x\n", false, c.args...)
		if r.status != 1 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("wharf %q: status %d, stderr %q; want status 1 and %q", c.args, r.status, r.stderr, c.want)
		}
		if took := time.Since(start); took > 8*time.Second {
			t.Errorf("wharf %q took %v to fail", c.args, took)
		}
	}
	// Consuming from the end of a partition is waiting, not an error.
	r := s.wharf(t, "", false, "consume", "two", "--partition", "1", "--offset", "3", "--exit-at-end")
	if r.status != 0 || r.stdout != "" || !strings.Contains(r.stderr, "reached the end of two[1] at offset 3") {
		t.Errorf("consume from the end offset: status %d, stdout %q, stderr %q", r.status, r.stdout, r.stderr)
	}
}

// --exit-at-end prints every record and exits, with a notice per
// partition, also when a transaction marker is the last offset; without
// it, the consumer says that it waits at the end.
func TestConsumeExitAtEnd(t *testing.T) {
	s := startServer(t, wharfBinary(t))
	s.mustWharf(t, "", "topics", "create", "ends", "--partitions", "2")
	s.mustWharf(t, "a\nb\n", "produce", "ends", "--partition", "0")
	s.mustWharf(t, "c\n", "produce", "ends", "--partition", "1")
	produceTransaction(t, s.addr, "ends", 1, "d")

	r := s.wharf(t, "", false, "consume", "ends", "--from-beginning", "--exit-at-end", "--format", `%p:%v\n`)
	if r.status != 0 {
		t.Fatalf("consume --exit-at-end: status %d, stderr %q", r.status, r.stderr)
	}
	if got := sortedLines(r.stdout); strings.Join(got, " ") != "0:a 0:b 1:c 1:d" {
		t.Errorf("consume --exit-at-end printed %q", got)
	}
	// Partition 1 ends after the commit marker, at offset 3.
	for _, want := range []string{"ends[0] at offset 2", "ends[1] at offset 3"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("no notice %q on stderr: %q", want, r.stderr)
		}
	}

	// An empty topic ends at once.
	s.mustWharf(t, "", "topics", "create", "empty")
	if r := s.wharf(t, "", false, "consume", "empty", "--exit-at-end"); r.status != 0 || r.stdout != "" {
		t.Errorf("consume of an empty topic with --exit-at-end: status %d, stdout %q, stderr %q", r.status, r.stdout, r.stderr)
	}

	// Without --exit-at-end, --timeout ends a wait at the end, as a failure.
	r = s.wharf(t, "", false, "consume", "ends", "--timeout", "500ms")
	if r.status != 1 || !strings.Contains(r.stderr, "waiting for new records") || !strings.Contains(r.stderr, "no record came for 500ms (--timeout)") {
		t.Errorf("consume --timeout 500ms at the end: status %d, stderr %q", r.status, r.stderr)
	}
}

// --group consumes as a member of a group and commits exactly the records
// it printed, so the next consumer of the group continues after them.
func TestConsumeAsGroupMember(t *testing.T) {
	s := startServer(t, wharfBinary(t))
	s.mustWharf(t, "", "topics", "create", "work")
	s.mustWharf(t, "1\n2\n3\n4\n5\n", "produce", "work")

	if out := s.mustWharf(t, "", "consume", "work", "--group", "billing", "--from-beginning", "--num", "2"); out != "1\n2\n" {
		t.Fatalf("first member printed %q, want 1 and 2", out)
	}
	// --from-beginning no longer applies: the group has committed 2.
	if out := s.mustWharf(t, "", "consume", "work", "--group", "billing", "--from-beginning", "--num", "2"); out != "3\n4\n" {
		t.Fatalf("second member printed %q, want 3 and 4", out)
	}
	r := s.wharf(t, "", false, "consume", "--topic", "work", "--group", "billing", "--exit-at-end")
	if r.status != 0 || r.stdout != "5\n" || !strings.Contains(r.stderr, "reached the end of work[0] at offset 5") {
		t.Fatalf("third member: status %d, stdout %q, stderr %q", r.status, r.stdout, r.stderr)
	}
	out := s.mustWharf(t, "", "groups", "describe", "billing")
	if !regexp.MustCompile(`(?m)^billing\s+work\s+0\s+5\s+5\s+0\s`).MatchString(out) {
		t.Errorf("the group did not commit offset 5:\n%s", out)
	}
	// A new group without --from-beginning starts at the end.
	r = s.wharf(t, "", false, "consume", "work", "--group", "fresh", "--exit-at-end")
	if r.status != 0 || r.stdout != "" {
		t.Errorf("a new group at the end: status %d, stdout %q, stderr %q", r.status, r.stdout, r.stderr)
	}
}

// produceTransaction writes value to topic's partition in a committed
// transaction, so that a commit marker follows it.
func produceTransaction(t *testing.T, addr, topic string, partition int32, value string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("wharf-cli-test"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: partition, Value: []byte(value)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
}

func sortedLines(s string) []string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	slices.Sort(lines)
	return lines
}
