package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wharf-mq/wharf/internal/node"
	"github.com/wharf-mq/wharf/internal/nodetest"
)

// consume in-process, so that `go test -race` watches the poll loop, the
// group's assignment callbacks and the end tracker together.
func TestConsumeInProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	n := nodetest.Start(t, nodetest.WithConfig(func(c *node.Config) { c.Groups.InitialRebalanceDelay = -1 }))
	cl := testClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for i, v := range []string{"a", "b", "c", "d"} {
		recs = append(recs, &kgo.Record{Topic: "in", Partition: int32(i % 2), Value: []byte(v)})
	}
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, "in"); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	consume := func(args ...string) (string, string) {
		t.Helper()
		status, stdout, stderr := runCLI(append([]string{"consume", "in", "--bootstrap-server", n.KafkaAddr(), "--format", `%p%v\n`}, args...)...)
		if status != 0 {
			t.Fatalf("consume %q: status %d, stderr %q", args, status, stderr)
		}
		return strings.Join(sortedLines(stdout), " "), stderr
	}
	if out, stderr := consume("--group", "g", "--from-beginning", "--exit-at-end"); out != "0a 0c 1b 1d" ||
		!strings.Contains(stderr, "in[0] at offset 2") || !strings.Contains(stderr, "in[1] at offset 2") {
		t.Errorf("group member: %q, stderr %q", out, stderr)
	}
	if out, _ := consume("--group", "g", "--exit-at-end"); out != "" {
		t.Errorf("the group's next member printed %q, want nothing: its first member committed everything", out)
	}
	if out, _ := consume("--offset", "1", "--exit-at-end"); out != "0c 1d" {
		t.Errorf("consume --offset 1: %q", out)
	}
}

func TestEndTracker(t *testing.T) {
	var notices bytes.Buffer
	ends := newEndTracker(&notices, "t", true)
	woken := 0
	ends.setWake(func() { woken++ })
	ends.start(map[int32]partitionEnd{0: {next: 0, end: 2}, 1: {next: 5, end: 5}})
	if got := notices.String(); got != "wharf: reached the end of t[1] at offset 5; not waiting for more (--exit-at-end)\n" {
		t.Errorf("notice after start: %q", got)
	}
	if ends.allAtEnd() || woken != 0 {
		t.Errorf("all at end with partition 0 at 0 of 2 (woken %d)", woken)
	}
	ends.consumed(0, 2, 2)
	ends.notice()
	ends.notice() // once per partition
	if !ends.allAtEnd() || strings.Count(notices.String(), "t[0] at offset 2") != 1 {
		t.Errorf("after consuming partition 0: all at end %v, notices %q", ends.allAtEnd(), notices.String())
	}
	ends.consumed(0, 3, 4) // the high watermark moved on
	if ends.allAtEnd() {
		t.Error("all at end while partition 0 has a new record")
	}
	ends.forget([]int32{0})
	ends.start(map[int32]partitionEnd{2: {next: 7, end: 7}}) // a group assigns a partition at its end
	if !ends.allAtEnd() || woken != 1 {
		t.Errorf("after partition 0 was revoked and 2 assigned at its end: all at end %v, woken %d", ends.allAtEnd(), woken)
	}
	ends.forget([]int32{1, 2})
	if ends.allAtEnd() {
		t.Error("all at end without partitions")
	}
}

// failingWriter takes n bytes, then fails every write, as a full disk or
// a closed pipe does.
type failingWriter struct{ n int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		return 0, errors.New("no space left on device")
	}
	w.n -= len(p)
	return len(p), nil
}

// TestConsumeGroupCommitsOnlyWhatWasPrinted: when the output fails, the
// records that did not reach it are not committed, so the group's next
// member prints them.
func TestConsumeGroupCommitsOnlyWhatWasPrinted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	n := nodetest.Start(t, nodetest.WithConfig(func(c *node.Config) { c.Groups.InitialRebalanceDelay = -1 }))
	cl := testClient(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "out"); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"a", "b", "c", "d"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "out", Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"consume", "out", "--bootstrap-server", n.KafkaAddr(), "--group", "g", "--from-beginning", "--exit-at-end", "--format", `%v\n`}
	var errOut bytes.Buffer
	if status := run(args, stdio{in: strings.NewReader(""), out: &failingWriter{}, err: &errOut}); status == 0 {
		t.Fatalf("consume into a failing output exited 0; stderr %q", errOut.String())
	}
	status, stdout, stderr := runCLI(args...)
	if status != 0 || stdout != "a\nb\nc\nd\n" {
		t.Fatalf("the group's next member: status %d, printed %q (stderr %q); want every record, none was printed before", status, stdout, stderr)
	}
}
