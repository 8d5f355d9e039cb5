package mq

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestQueueStatsCount: the management API's message_stats of a queue count
// publishes, deliveries to consumers and to basic.get (with and without
// ack), redeliveries and acks, and the depth gauges match the queue.
func TestQueueStatsCount(t *testing.T) {
	e := newEnv(t)
	e.declareQueue("q", false)
	for _, b := range bodies("m", 5) {
		e.publish(msg("", "q", b))
	}
	d, ok, err := e.v.Get("q", false, 1) // get, awaiting ack
	if err != nil || !ok {
		t.Fatalf("Get: %v %v", ok, err)
	}
	if err := e.v.Requeue("q", d.Tag); err != nil { // back, redelivered next time
		t.Fatal(err)
	}
	if _, _, err := e.v.Get("q", true, 1); err != nil { // get_no_ack, a redelivery
		t.Fatal(err)
	}
	c := newConsumer(2)
	sub := e.consume("q", c, false) // two deliveries awaiting ack
	defer sub.Cancel()
	if got := len(c.deliveries()); got != 2 {
		t.Fatalf("consumer got %d deliveries, want 2", got)
	}
	if err := e.v.Ack("q", c.deliveries()[0].Tag); err != nil {
		t.Fatal(err)
	}

	st, _, err := e.v.QueueStatsOf(context.Background(), "q")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"publish": 5, "deliver": 2, "deliver_no_ack": 0, "get": 1, "get_no_ack": 1,
		"deliver_get": 4, "redeliver": 1, "ack": 1}
	for _, s := range st.MessageStats {
		if s.Value != want[s.Name] {
			t.Errorf("%s = %d, want %d", s.Name, s.Value, want[s.Name])
		}
		delete(want, s.Name)
	}
	if len(want) != 0 {
		t.Errorf("missing message stats: %v", want)
	}
	wantDepth := map[string]int64{"messages": 3, "messages_ready": 2, "messages_unacknowledged": 1}
	for _, s := range st.Depth {
		if s.Value != wantDepth[s.Name] {
			t.Errorf("%s = %d, want %d", s.Name, s.Value, wantDepth[s.Name])
		}
	}
	if all, _ := e.v.r.QueueStats(context.Background(), []*VHost{e.v}); len(all[0]) != 1 || all[0][0].Name != "q" {
		t.Fatalf("QueueStats = %+v", all)
	}
	if _, _, err := e.v.QueueStatsOf(context.Background(), "nope"); err == nil {
		t.Fatal("QueueStatsOf a missing queue: no error")
	}
}

// TestQueueStatsOfOtherNodes: node 3 shows the classic queues of nodes 1
// and 2 with their home nodes' figures, asking each home node once for
// all its queues; while node 2 is out of contact its queue is shown down
// (without a call), and node 1's still with its figures.
func TestQueueStatsOfOtherNodes(t *testing.T) {
	envs, calls := newClassicEnvs(t, 3)
	envs[0].declareQueue("a", true)
	envs[0].declareQueue("b", true)
	envs[1].declareQueue("c", true)
	for _, body := range bodies("m", 3) {
		waitDurable(t, envs[0].publish(persistent("", "a", body)))
	}
	waitDurable(t, envs[1].publish(persistent("", "c", "m")))
	envs[0].consume("a", newConsumer(1), false) // one unacked
	eventually(t, "node 3 follows the declares", func() bool { return len(envs[2].v.QueueDetails()) == 3 })

	figures := func(e *env) string {
		var out []string
		all, _ := e.v.r.QueueStats(context.Background(), []*VHost{e.v})
		for _, st := range all[0] {
			out = append(out, fmt.Sprintf("%s %s %d/%d/%d %v", st.Name, st.State, st.MessagesReady,
				st.MessagesUnacknowledged, st.Consumers, st.Depth))
		}
		return strings.Join(out, "; ")
	}
	homes := figures(envs[0]) // node 1's own a and b, and c asked of node 2
	if !strings.Contains(homes, "a running 2/1/1") || !strings.Contains(homes, "c running 1/0/0") {
		t.Fatalf("node 1 shows %s", homes)
	}
	before := len(calls.ops(opStats))
	if shown := figures(envs[2]); shown != homes {
		t.Fatalf("node 3 shows %s; the home nodes %s", shown, homes)
	}
	asked := calls.ops(opStats)[before:]
	if len(asked) != 2 || len(asked[0].Served)+len(asked[1].Served) != 3 {
		t.Fatalf("node 3's listing made the calls %+v, want one per home node, 3 queues in all", asked)
	}

	calls.setDown(2, true)
	before = len(calls.ops(opStats))
	st, _, err := envs[2].v.QueueStatsOf(context.Background(), "c")
	if err != nil || st.State != "down" {
		t.Fatalf("node 3 shows c, whose node 2 is out of contact, as %q, %v", st.State, err)
	}
	if st, _, err := envs[2].v.QueueStatsOf(context.Background(), "a"); err != nil || st.State != "running" || st.MessagesReady != 2 {
		t.Fatalf("node 3 shows a of node 1 as %q with %d ready, %v", st.State, st.MessagesReady, err)
	}
	if asked := calls.ops(opStats)[before:]; len(asked) != 1 {
		t.Fatalf("with node 2 out of contact node 3 made the calls %+v, want node 1's alone", asked)
	}
}
