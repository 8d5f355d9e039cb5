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

// TestBindingsOfOtherNodes: node 3 lists each binding of the cluster
// once: the recorded ones (from durable exchanges to durable and
// exclusive queues, which it follows), node 2's own (to its transient
// queue, from its transient exchange) as node 2 answers, with the default
// exchange's implicit one to each queue, the transient one's from node 2.
func TestBindingsOfOtherNodes(t *testing.T) {
	envs, _ := newClassicEnvs(t, 3)
	envs[0].declareQueue("durable", true)
	envs[0].declareExchange("news", "fanout", true, nil)
	envs[0].declareExclusive("mine", 7) // bound to news
	envs[0].bind("durable", "amq.direct", "d", nil)
	envs[1].declareQueue("passing", false)
	envs[1].declareExchange("events", "topic", false, nil)
	envs[1].bind("passing", "amq.direct", "p", nil)
	envs[1].bind("durable", "events", "e.#", nil)
	node3 := envs[2].v
	eventually(t, "node 3 follows the recorded bindings", func() bool { return len(node3.Bindings()) == 2 })

	all, unanswered := node3.r.BindingsOf(context.Background(), []*VHost{node3})
	var got []string
	for _, b := range all[0] {
		got = append(got, fmt.Sprintf("%s→%s:%s", b.Source, b.Destination, b.Key))
	}
	want := []string{"→durable:durable", "→mine:mine", "→passing:passing",
		"amq.direct→durable:d", "amq.direct→passing:p", "events→durable:e.#", "news→mine:"}
	if !slices.Equal(got, want) || len(unanswered) != 0 {
		t.Fatalf("node 3 lists %q, unanswered %v; want %q", got, unanswered, want)
	}
}
