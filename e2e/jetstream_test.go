package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/wharf-mq/wharf/internal/node"
)

// The JetStream tests run every scenario against nats-server 2.15 (with
// JetStream, in this process) and against a Wharf node, and expect the
// same results from both: what a nats.go user sees is the reference.

// jsServer is a JetStream server under test.
type jsServer struct {
	name string
	url  string
	node *node.Node // nil for nats-server
}

// bothJetStreams starts a Wharf node and a nats-server with JetStream, each
// on a free loopback port, stopped when the test ends.
func bothJetStreams(t *testing.T) []jsServer {
	return []jsServer{startWharfJetStream(t), startNATSJetStream(t)}
}

func startWharfJetStream(t *testing.T) jsServer {
	t.Helper()
	n := startNATSNode(t, nil)
	return jsServer{name: "wharf", url: "nats://" + n.NATSAddr(), node: n}
}

func startNATSJetStream(t *testing.T) jsServer {
	t.Helper()
	s, err := natsserver.NewServer(&natsserver.Options{
		Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
		JetStream: true, StoreDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(testTimeout) {
		t.Fatal("nats-server did not start")
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return jsServer{name: "nats-server", url: s.ClientURL()}
}

// forEachJetStream runs fn as a subtest against each server.
func forEachJetStream(t *testing.T, fn func(t *testing.T, srv jsServer)) {
	for _, srv := range bothJetStreams(t) {
		t.Run(srv.name, func(t *testing.T) { fn(t, srv) })
	}
}

// connectJS connects nats.go to srv and returns its JetStream context.
func connectJS(t *testing.T, srv jsServer) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(srv.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

func TestJetStreamPublishDeduplicates(t *testing.T) {
	forEachJetStream(t, func(t *testing.T, srv jsServer) {
		ctx := testContext(t)
		_, js := connectJS(t, srv)
		s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
		if err != nil {
			t.Fatal(err)
		}
		var seqs []uint64
		var dups []bool
		for _, id := range []string{"a", "b", "a", "c", "b"} {
			ack, err := js.Publish(ctx, "orders.new", []byte("order "+id), jetstream.WithMsgID(id))
			if err != nil {
				t.Fatal(err)
			}
			seqs = append(seqs, ack.Sequence)
			dups = append(dups, ack.Duplicate)
		}
		if want := []uint64{1, 2, 1, 3, 2}; !slices.Equal(seqs, want) {
			t.Errorf("sequences %v, want %v", seqs, want)
		}
		if want := []bool{false, false, true, false, true}; !slices.Equal(dups, want) {
			t.Errorf("duplicates %v, want %v", dups, want)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs != 3 || info.State.FirstSeq != 1 || info.State.LastSeq != 3 {
			t.Errorf("state %+v", info.State)
		}
		_, err = js.Publish(ctx, "orders.new", []byte("x"), jetstream.WithExpectLastSequence(2))
		var apiErr *jetstream.APIError
		if !errors.As(err, &apiErr) || apiErr.ErrorCode != jetstream.JSErrCodeStreamWrongLastSequence {
			t.Errorf("publish expecting last sequence 2: %v", err)
		}
		fmt.Println(srv.name, err)
	})
}

func TestJetStreamPullConsumer(t *testing.T) {
	forEachJetStream(t, func(t *testing.T, srv jsServer) {
		ctx := testContext(t)
		_, js := connectJS(t, srv)
		s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			if _, err := js.Publish(ctx, fmt.Sprintf("orders.%d", i), []byte{byte('0' + i)}); err != nil {
				t.Fatal(err)
			}
		}
		c, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "work", AckPolicy: jetstream.AckExplicitPolicy})
		if err != nil {
			t.Fatal(err)
		}
		batch, err := c.Fetch(3, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for m := range batch.Messages() {
			got = append(got, string(m.Data()))
			m.Ack()
		}
		if batch.Error() != nil {
			t.Fatal(batch.Error())
		}
		if !slices.Equal(got, []string{"0", "1", "2"}) {
			t.Errorf("fetched %q", got)
		}
		batch, err = c.FetchNoWait(10)
		if err != nil {
			t.Fatal(err)
		}
		got = nil
		for m := range batch.Messages() {
			got = append(got, string(m.Data()))
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Equal(got, []string{"3", "4"}) {
			t.Errorf("fetched %q", got)
		}
		info, err := c.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.NumPending != 0 || info.NumAckPending != 0 || info.AckFloor.Stream != 5 || info.Delivered.Consumer != 5 {
			t.Errorf("consumer info %+v", info)
		}
		_ = context.Background
	})
}
