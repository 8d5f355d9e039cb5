package mq

import (
	"context"
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

	st, err := e.v.QueueStatsOf(context.Background(), "q")
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
	if all := e.v.r.QueueStats(context.Background(), []*VHost{e.v})[0]; len(all) != 1 || all[0].Name != "q" {
		t.Fatalf("QueueStats = %+v", all)
	}
	if _, err := e.v.QueueStatsOf(context.Background(), "nope"); err == nil {
		t.Fatal("QueueStatsOf a missing queue: no error")
	}
}
