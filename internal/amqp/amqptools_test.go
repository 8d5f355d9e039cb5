package amqp

import (
	"context"
	"os/exec"
	"strings"
	"testing"
)

// TestAMQPTools publishes and consumes with the Debian amqp-tools
// (librabbitmq-c), a second client implementation besides amqp091-go.
func TestAMQPTools(t *testing.T) {
	publishBin, err1 := exec.LookPath("amqp-publish")
	consumeBin, err2 := exec.LookPath("amqp-consume")
	if err1 != nil || err2 != nil {
		t.Fatal("amqp-publish/amqp-consume not installed: apt-get install amqp-tools (.ci/run installs it)")
	}
	b := startBroker(t)
	declareQueue(t, b.channel(), "tools", true)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	url := "amqp://guest:guest@" + b.addr

	for _, msg := range []string{"first from librabbitmq", "second from librabbitmq"} {
		out, err := exec.CommandContext(ctx, publishBin, "--url="+url, "-r", "tools", "-p", "-C", "text/plain", "-b", msg).CombinedOutput()
		if err != nil {
			t.Fatalf("amqp-publish: %v\n%s", err, out)
		}
	}
	if n := b.queueInfo("tools").Messages; n != 2 {
		t.Fatalf("queue holds %d messages after amqp-publish, want 2", n)
	}
	// amqp-consume runs the command once per message with the body on
	// stdin; -c 2 stops after two (acked) messages.
	out, err := exec.CommandContext(ctx, consumeBin, "--url="+url, "-q", "tools", "-c", "2", "cat").CombinedOutput()
	if err != nil {
		t.Fatalf("amqp-consume: %v\n%s", err, out)
	}
	if got := string(out); !strings.Contains(got, "first from librabbitmq") || !strings.Contains(got, "second from librabbitmq") ||
		strings.Index(got, "first") > strings.Index(got, "second") {
		t.Errorf("amqp-consume printed %q", got)
	}
	waitFor(t, "the consumed messages to be acked", func() bool {
		q := b.queueInfo("tools")
		return q.Messages == 0 && q.Consumers == 0
	})
	// The durable queue has nothing left after a restart: the acks stuck.
	b.restart()
	if n := b.queueInfo("tools").Messages; n != 0 {
		t.Errorf("%d messages after restart, want 0", n)
	}
}
