package e2e

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/wharf-mq/wharf/internal/node"
)

// restartable is a JetStream server that can be stopped cleanly and
// started again on its data.
type restartable struct {
	name    string
	start   func() string // starts the server, returns its URL
	stop    func()
	running bool
}

func restartableJetStreams(t *testing.T) []*restartable {
	wharfDir, natsDir := t.TempDir(), t.TempDir()
	var n *node.Node
	var s *natsserver.Server
	servers := []*restartable{{
		name: "wharf",
		start: func() string {
			n = startNATSNode(t, func(c *node.Config) { c.DataDir = wharfDir })
			return "nats://" + n.NATSAddr()
		},
		stop: func() {
			if err := n.Close(testContext(t)); err != nil {
				t.Errorf("close node: %v", err)
			}
		},
	}, {
		name: "nats-server",
		start: func() string {
			var err error
			s, err = natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
				JetStream: true, StoreDir: natsDir})
			if err != nil {
				t.Fatal(err)
			}
			go s.Start()
			if !s.ReadyForConnections(testTimeout) {
				t.Fatal("nats-server did not start")
			}
			return s.ClientURL()
		},
		stop: func() {
			s.Shutdown()
			s.WaitForShutdown()
		},
	}}
	t.Cleanup(func() {
		for _, srv := range servers {
			if srv.running {
				srv.stop()
			}
		}
	})
	return servers
}

func (r *restartable) restart(t *testing.T) jsServer {
	t.Helper()
	if r.running {
		r.stop()
	}
	url := r.start()
	r.running = true
	return jsServer{name: r.name, url: url}
}

// Streams, their duplicate windows, interior deletes, durable consumers'
// positions and acknowledgements, and KV buckets survive a restart.
func TestJetStreamStateSurvivesRestart(t *testing.T) {
	for _, r := range restartableJetStreams(t) {
		t.Run(r.name, func(t *testing.T) {
			ctx := testContext(t)
			_, js := connectJS(t, r.restart(t))
			s := createStream(t, js, jetstream.StreamConfig{Name: "ORDERS", MaxMsgsPerSubject: 2}, "0", "1", "2", "3")
			if _, err := js.Publish(ctx, "orders.id", []byte("id1"), jetstream.WithMsgID("id-1")); err != nil {
				t.Fatal(err)
			}
			for _, v := range []string{"x1", "x2", "x3"} { // x1 leaves: two per subject
				if _, err := js.Publish(ctx, "orders.x", []byte(v)); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.DeleteMsg(ctx, 2); err != nil {
				t.Fatal(err)
			}
			c, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "work", AckPolicy: jetstream.AckExplicitPolicy,
				AckWait: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			batch, err := c.Fetch(3, jetstream.FetchMaxWait(2*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			var held jetstream.Msg
			for m := range batch.Messages() {
				if string(m.Data()) == "3" {
					held = m // left pending
					continue
				}
				if err := m.DoubleAck(ctx); err != nil {
					t.Fatal(err)
				}
			}
			eph, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Name: "eph", InactiveThreshold: time.Minute,
				AckPolicy: jetstream.AckExplicitPolicy})
			if err != nil {
				t.Fatal(err)
			}
			if m := fetchOne(t, eph, 2*time.Second); m == nil || m.DoubleAck(ctx) != nil {
				t.Fatal("ephemeral consumer: no message, or its ack failed")
			}
			kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "settings", History: 2})
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range []string{"a", "b", "c"} {
				if _, err := kv.Put(ctx, "k", []byte(v)); err != nil {
					t.Fatal(err)
				}
			}
			before, err := s.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			cBefore, err := c.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if held == nil {
				t.Fatal("message 3 was not fetched")
			}

			_, js = connectJS(t, r.restart(t))
			s, err = js.Stream(ctx, "ORDERS")
			if err != nil {
				t.Fatal(err)
			}
			after, err := s.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if after.State.Msgs != before.State.Msgs || after.State.Bytes != before.State.Bytes ||
				after.State.FirstSeq != before.State.FirstSeq || after.State.LastSeq != before.State.LastSeq ||
				after.State.NumDeleted != before.State.NumDeleted {
				t.Errorf("state before the restart %+v, after %+v", before.State, after.State)
			}
			ack, err := js.Publish(ctx, "orders.id", []byte("id1 again"), jetstream.WithMsgID("id-1"))
			if err != nil {
				t.Fatal(err)
			}
			if !ack.Duplicate || ack.Sequence != 5 {
				t.Errorf("publish with a message id from before the restart: %+v", ack)
			}
			c, err = s.Consumer(ctx, "work")
			if err != nil {
				t.Fatal(err)
			}
			cAfter, err := c.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			seqs := func(s jetstream.SequenceInfo) [2]uint64 { return [2]uint64{s.Consumer, s.Stream} }
			if seqs(cAfter.Delivered) != seqs(cBefore.Delivered) || seqs(cAfter.AckFloor) != seqs(cBefore.AckFloor) ||
				cAfter.NumAckPending != cBefore.NumAckPending || cAfter.NumPending != cBefore.NumPending {
				t.Errorf("consumer before the restart %+v %+v %d %d, after %+v %+v %d %d",
					cBefore.Delivered, cBefore.AckFloor, cBefore.NumAckPending, cBefore.NumPending,
					cAfter.Delivered, cAfter.AckFloor, cAfter.NumAckPending, cAfter.NumPending)
			}
			var got []delivery
			for {
				m := fetchOne(t, c, 4*time.Second)
				if m == nil {
					break
				}
				got = append(got, deliveryOf(t, m))
				m.Ack()
			}
			// The pending "3" comes again once its ack wait ends; the
			// rest once.
			slices.SortFunc(got, func(a, b delivery) int { return strings.Compare(a.data, b.data) })
			if want := []delivery{{"3", 2}, {"id1", 1}, {"x2", 1}, {"x3", 1}}; !slices.Equal(got, want) {
				t.Errorf("after the restart the consumer got %v, want %v", got, want)
			}
			// An ephemeral consumer (file storage) survives too, within its
			// inactive threshold.
			eph, err = s.Consumer(ctx, "eph")
			if err != nil {
				t.Fatalf("ephemeral consumer after the restart: %v", err)
			}
			if info := eph.CachedInfo(); info.AckFloor.Stream != 1 || info.Delivered.Consumer != 1 {
				t.Errorf("ephemeral consumer after the restart: delivered %+v, ack floor %+v", info.Delivered, info.AckFloor)
			}
			kv, err = js.KeyValue(ctx, "settings")
			if err != nil {
				t.Fatal(err)
			}
			e, err := kv.Get(ctx, "k")
			if err != nil || string(e.Value()) != "c" {
				t.Errorf("kv get after restart: %v %v", e, err)
			}
			hist, err := kv.History(ctx, "k")
			if err != nil || len(hist) != 2 {
				t.Errorf("kv history after restart: %d entries, %v", len(hist), err)
			}
			if _, err := kv.Create(ctx, "k", []byte("d")); !errors.Is(err, jetstream.ErrKeyExists) {
				t.Errorf("kv create of an existing key after restart: %v", err)
			}
		})
	}
}
