package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A stream is the Kafka topic js.<name>: a Kafka consumer reads its
// messages (key: subject, headers: the NATS headers, value: the payload,
// offset: sequence - 1), records a Kafka producer writes there become
// messages of the stream, and Kafka clients cannot delete the topic.
func TestJetStreamStreamIsAKafkaTopic(t *testing.T) {
	srv := startWharfJetStream(t)
	ctx := testContext(t)
	nc, js := connectJS(t, srv)
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
	if err != nil {
		t.Fatal(err)
	}
	m := natsMsg("orders.eu", "first")
	m.Header.Set("Nats-Msg-Id", "m-1")
	m.Header.Add("Region", "eu")
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "orders.us", []byte("second")); err != nil {
		t.Fatal(err)
	}

	recs := consumeN(t, newConsumer(t, srv.node, "js.ORDERS"), 2)
	got := []string{}
	for _, r := range recs {
		var hdrs []string
		for _, h := range r.Headers {
			hdrs = append(hdrs, h.Key+"="+string(h.Value))
		}
		slices.Sort(hdrs) // nats.go writes its header map in no fixed order; Wharf keeps the order it gets
		got = append(got, fmt.Sprintf("%d %s %v %s", r.Offset, r.Key, hdrs, r.Value))
	}
	if want := []string{"0 orders.eu [Nats-Msg-Id=m-1 Region=eu] first", "1 orders.us [] second"}; !slices.Equal(got, want) {
		t.Errorf("Kafka read %q, want %q", got, want)
	}

	produceSync(t, newFranz(t, srv.node), &kgo.Record{Topic: "js.ORDERS", Key: []byte("orders.kafka"), Value: []byte("third"),
		Headers: []kgo.RecordHeader{{Key: "Source", Value: []byte("franz")}}})
	c, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{FilterSubject: "orders.kafka"})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := c.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	md, _ := msg.Metadata()
	if string(msg.Data()) != "third" || msg.Headers().Get("Source") != "franz" || md.Sequence.Stream != 3 {
		t.Errorf("the Kafka record as a stream message: %q %v seq %d", msg.Data(), msg.Headers(), md.Sequence.Stream)
	}
	if ack, err := js.Publish(ctx, "orders.eu", []byte("fourth")); err != nil || ack.Sequence != 4 {
		t.Errorf("publish after a Kafka produce: %+v %v", ack, err)
	}

	resp, err := newAdmin(t, srv.node).DeleteTopics(ctx, "js.ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	if r := resp["js.ORDERS"]; r.Err == nil {
		t.Error("a Kafka client deleted a stream's topic")
	}
	if err := js.DeleteStream(ctx, "ORDERS"); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}}); err != nil {
		t.Fatalf("create the stream again once deleted: %v", err)
	}
	_ = nc
}

func natsMsg(subject, data string) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Data = []byte(data)
	return m
}
