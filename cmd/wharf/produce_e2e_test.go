package main

import (
	"context"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// produce --header puts headers on every record, --key-separator splits
// keys by another string, and --topic names the topic as Kafka's console
// producer takes it.
func TestProduceHeadersAndKeySeparator(t *testing.T) {
	s := startServer(t, wharfBinary(t))
	s.mustWharf(t, "k1::v1\nplain\tvalue\n", "produce", "--topic", "h", "--key-separator", "::",
		"--header", "source=cli", "--header", "trace=a=b")
	out := s.mustWharf(t, "", "consume", "h", "--from-beginning", "--num", "2", "--format", `%k|%v|%h\n`)
	if want := "k1|v1|source=cli,trace=a=b\n|plain\tvalue|source=cli,trace=a=b\n"; out != want {
		t.Errorf("consumed %q, want %q", out, want)
	}
}

// A produce that runs for a while reports its progress on stderr, and
// still prints nothing on stdout.
func TestProduceReportsProgress(t *testing.T) {
	s := startServer(t, wharfBinary(t))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, wharfBin, "produce", "slow", "--bootstrap-server", s.addr)
	cmd.Env = cleanEnv()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr lockedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	io.WriteString(stdin, "first\nsecond\n")
	// stdin stays open, so the produce goes on until it has reported.
	waitFor(t, ctx, func() bool { return strings.Contains(stderr.String(), "wharf: produce slow: 2 records acknowledged") })
	io.WriteString(stdin, "third\n")
	stdin.Close()
	if err := cmd.Wait(); err != nil || stdout.String() != "" {
		t.Fatalf("produce: %v, stdout %q, stderr %q", err, stdout.String(), stderr.String())
	}
	if out := s.mustWharf(t, "", "consume", "slow", "--from-beginning", "--exit-at-end"); out != "first\nsecond\nthird\n" {
		t.Errorf("consumed %q", out)
	}
}

// waitFor polls cond until it holds, failing the test when ctx ends first.
func waitFor(t *testing.T, ctx context.Context, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal("condition not met before the deadline")
		}
	}
}
