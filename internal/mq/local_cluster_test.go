package mq

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// TestLocalQueuesOfOtherNodes: node 3 lists node 1's exclusive queue and
// node 2's transient one beside the replicated durable queue, each with
// its node, figures and arguments (their field types kept), finds one by
// name, lists node 1's transient exchange, and counts them all in its
// totals; with node 2 out of contact, its queue is missing and node 2
// named.
func TestLocalQueuesOfOtherNodes(t *testing.T) {
	envs, calls := newClassicEnvs(t, 3)
	envs[0].declareQueue("durable", true)
	if _, err := envs[0].v.DeclareQueue(QueueDef{Name: "mine", Exclusive: true, Durable: true,
		Args: amqpwire.Table{"x-max-length": int32(10)}, Owner: 7}, false); err != nil {
		t.Fatal(err)
	}
	for _, body := range bodies("m", 2) {
		envs[0].publish(msg("", "mine", body))
	}
	envs[1].declareQueue("passing", false)
	envs[0].declareExchange("events", "topic", false, amqpwire.Table{"alternate-exchange": "spill"})
	node3 := envs[2].v
	eventually(t, "node 3 follows the durable declare", func() bool { return node3.HasQueue("durable") })

	listed := func() ([]string, []int32) {
		all, unanswered := node3.r.QueueStats(context.Background(), []*VHost{node3})
		var out []string
		for _, st := range all[0] {
			out = append(out, fmt.Sprintf("%s node %d durable %v exclusive %v %s %d ready %T",
				st.Name, st.Node, st.Durable, st.Exclusive, st.State, st.MessagesReady, st.Args["x-max-length"]))
		}
		return out, unanswered
	}
	want := []string{
		"durable node 1 durable true exclusive false running 0 ready <nil>",
		"mine node 1 durable false exclusive true running 2 ready int32",
		"passing node 2 durable false exclusive false running 0 ready <nil>",
	}
	if got, unanswered := listed(); !slices.Equal(got, want) || len(unanswered) != 0 {
		t.Fatalf("node 3 lists %q, unanswered %v; want %q", got, unanswered, want)
	}
	st, _, err := node3.QueueStatsOf(context.Background(), "mine")
	if err != nil || st.Node != 1 || !st.Exclusive || st.MessagesReady != 2 || st.Depth == nil {
		t.Fatalf("node 3 finds node 1's exclusive queue: %+v, %v", st, err)
	}
	if _, _, err := node3.QueueStatsOf(context.Background(), "nowhere"); err == nil {
		t.Fatal("node 3 finds a queue no node has")
	}
	xs, unanswered := node3.r.ExchangesElsewhere(context.Background(), "/", "")
	if len(xs) != 1 || len(unanswered) != 0 || fmt.Sprintf("%s %d %s %v %v", xs[0].Name, xs[0].Node, xs[0].Type, xs[0].Durable, xs[0].Args) !=
		"events 1 topic false map[alternate-exchange:spill]" {
		t.Fatalf("node 3 lists the other nodes' transient exchanges %+v, unanswered %v", xs, unanswered)
	}

	totals, unanswered := node3.r.Totals(context.Background(), []*VHost{node3})
	wantTotals := VHostTotals{VHost: "/", Queues: 3, Exchanges: len(node3.Exchanges()) + 1, Messages: 2, Ready: 2}
	if len(totals) != 1 || totals[0] != wantTotals || len(unanswered) != 0 {
		t.Fatalf("node 3's totals %+v, unanswered %v; want %+v", totals, unanswered, wantTotals)
	}

	calls.setDown(2, true)
	if got, unanswered := listed(); !slices.Equal(got, want[:2]) || !slices.Equal(unanswered, []int32{2}) {
		t.Fatalf("with node 2 out of contact node 3 lists %q, unanswered %v", got, unanswered)
	}
	totals, unanswered = node3.r.Totals(context.Background(), []*VHost{node3})
	if wantTotals.Queues--; totals[0] != wantTotals || !slices.Equal(unanswered, []int32{2}) {
		t.Fatalf("with node 2 out of contact node 3's totals %+v, unanswered %v; want %+v", totals, unanswered, wantTotals)
	}
	if _, unanswered, err := node3.QueueStatsOf(context.Background(), "passing"); err == nil || !slices.Equal(unanswered, []int32{2}) {
		t.Fatalf("node 3 looks for node 2's queue with node 2 out of contact: unanswered %v, %v", unanswered, err)
	}
}
