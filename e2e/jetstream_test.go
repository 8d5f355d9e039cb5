package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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

// createStream creates a stream on subjects "<name>.>" (lower case) and
// publishes the payloads to <name>.0, <name>.1, ...
func createStream(t *testing.T, js jetstream.JetStream, cfg jetstream.StreamConfig, payloads ...string) jetstream.Stream {
	t.Helper()
	ctx := testContext(t)
	if cfg.Subjects == nil {
		cfg.Subjects = []string{strings.ToLower(cfg.Name) + ".>"}
	}
	s, err := js.CreateStream(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range payloads {
		if _, err := js.Publish(ctx, fmt.Sprintf("%s.%d", strings.ToLower(cfg.Name), i), []byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// fetchOne fetches one message within wait, nil if none came.
func fetchOne(t *testing.T, c jetstream.Consumer, wait time.Duration) jetstream.Msg {
	t.Helper()
	batch, err := c.Fetch(1, jetstream.FetchMaxWait(wait))
	if err != nil {
		t.Fatal(err)
	}
	var got jetstream.Msg
	for m := range batch.Messages() {
		got = m
	}
	if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
		t.Fatal(err)
	}
	return got
}

// delivery is what a test sees of a delivered message.
type delivery struct {
	data      string
	delivered uint64
}

func deliveryOf(t *testing.T, m jetstream.Msg) delivery {
	t.Helper()
	if m == nil {
		return delivery{}
	}
	md, err := m.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	return delivery{string(m.Data()), md.NumDelivered}
}

// A delivery not acknowledged within ack_wait comes again, up to
// max_deliver times.
func TestJetStreamRedeliveryAfterAckWait(t *testing.T) {
	forEachJetStream(t, func(t *testing.T, srv jsServer) {
		ctx := testContext(t)
		_, js := connectJS(t, srv)
		s := createStream(t, js, jetstream.StreamConfig{Name: "WORK"}, "job")
		c, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "w", AckPolicy: jetstream.AckExplicitPolicy,
			AckWait: 300 * time.Millisecond, MaxDeliver: 2})
		if err != nil {
			t.Fatal(err)
		}
		var got []delivery
		for range 3 {
			got = append(got, deliveryOf(t, fetchOne(t, c, 2*time.Second)))
		}
		if want := []delivery{{"job", 1}, {"job", 2}, {}}; !slices.Equal(got, want) {
			t.Errorf("deliveries %v, want %v", got, want)
		}
		info, err := c.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.NumAckPending != 0 || info.NumRedelivered != 1 || info.Delivered.Consumer != 2 {
			t.Errorf("after max_deliver: %d pending, %d redelivered, delivered %+v", info.NumAckPending, info.NumRedelivered, info.Delivered)
		}
	})
}

// +ACK, +TERM, -NAK and +WPI as nats.go sends them.
func TestJetStreamAckKinds(t *testing.T) {
	forEachJetStream(t, func(t *testing.T, srv jsServer) {
		ctx := testContext(t)
		_, js := connectJS(t, srv)
		s := createStream(t, js, jetstream.StreamConfig{Name: "WORK"}, "a", "b", "c")
		c, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "w", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		batch, err := c.Fetch(3, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var msgs []jetstream.Msg
		for m := range batch.Messages() {
			msgs = append(msgs, m)
		}
		if len(msgs) != 3 {
			t.Fatalf("fetched %d messages", len(msgs))
		}
		if err := msgs[0].Ack(); err != nil {
			t.Fatal(err)
		}
		if err := msgs[1].Term(); err != nil {
			t.Fatal(err)
		}
		if err := msgs[2].Nak(); err != nil {
			t.Fatal(err)
		}
		again := fetchOne(t, c, 2*time.Second)
		if got := deliveryOf(t, again); got != (delivery{"c", 2}) {
			t.Fatalf("after -NAK: %v", got)
		}
		if err := again.InProgress(); err != nil {
			t.Fatal(err)
		}
		if m := fetchOne(t, c, 500*time.Millisecond); m != nil {
			t.Fatalf("delivered %v while one was in progress", deliveryOf(t, m))
		}
		if err := again.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
		info, err := c.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.NumAckPending != 0 || info.AckFloor.Stream != 3 || info.NumRedelivered != 0 || info.NumPending != 0 {
			t.Errorf("info after acks: ack floor %+v, %d ack pending, %d redelivered, %d pending",
				info.AckFloor, info.NumAckPending, info.NumRedelivered, info.NumPending)
		}
	})
}

// -NAK with a delay comes back after the delay, not before; backoff spaces
// redeliveries by its values.
func TestJetStreamNakDelayAndBackoff(t *testing.T) {
	forEachJetStream(t, func(t *testing.T, srv jsServer) {
		ctx := testContext(t)
		_, js := connectJS(t, srv)
		s := createStream(t, js, jetstream.StreamConfig{Name: "WORK"}, "a")
		c, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "w", AckPolicy: jetstream.AckExplicitPolicy,
			BackOff: []time.Duration{200 * time.Millisecond, 800 * time.Millisecond}, MaxDeliver: 4})
		if err != nil {
			t.Fatal(err)
		}
		m := fetchOne(t, c, time.Second)
		start := time.Now()
		if err := m.NakWithDelay(400 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		m = fetchOne(t, c, 3*time.Second)
		if d := deliveryOf(t, m); d != (delivery{"a", 2}) || time.Since(start) < 350*time.Millisecond {
			t.Fatalf("after -NAK 400ms: %v after %v", d, time.Since(start))
		}
		// Not acknowledged: the second backoff value (800ms) applies.
		start = time.Now()
		m = fetchOne(t, c, 3*time.Second)
		if d := deliveryOf(t, m); d != (delivery{"a", 3}) || time.Since(start) < 700*time.Millisecond {
			t.Fatalf("after the backoff: %v after %v", d, time.Since(start))
		}
		m.Ack()
	})
}

// Push consumers, through the new API and the legacy one (js.Subscribe,
// queue groups), and a pull consumer's Consume.
func TestJetStreamPushAndConsume(t *testing.T) {
	forEachJetStream(t, func(t *testing.T, srv jsServer) {
		ctx := testContext(t)
		nc, js := connectJS(t, srv)
		s := createStream(t, js, jetstream.StreamConfig{Name: "EVENTS"}, "0", "1", "2")

		push, err := s.CreatePushConsumer(ctx, jetstream.ConsumerConfig{Durable: "push", DeliverSubject: "deliver.push",
			AckPolicy: jetstream.AckExplicitPolicy})
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan string, 10)
		cc, err := push.Consume(func(m jetstream.Msg) {
			got <- m.Subject() + "=" + string(m.Data())
			m.Ack()
		})
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Stop()
		if _, err := js.Publish(ctx, "events.3", []byte("3")); err != nil {
			t.Fatal(err)
		}
		want := []string{"events.0=0", "events.1=1", "events.2=2", "events.3=3"}
		if recv := receiveN(t, got, len(want)); !slices.Equal(recv, want) {
			t.Errorf("push consumer received %q, want %q", recv, want)
		}

		pull, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "pull", AckPolicy: jetstream.AckExplicitPolicy})
		if err != nil {
			t.Fatal(err)
		}
		pulled := make(chan string, 10)
		pc, err := pull.Consume(func(m jetstream.Msg) {
			pulled <- string(m.Data())
			m.Ack()
		}, jetstream.PullMaxMessages(2))
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Stop()
		if recv := receiveN(t, pulled, 4); !slices.Equal(recv, []string{"0", "1", "2", "3"}) {
			t.Errorf("Consume received %q", recv)
		}

		// The legacy API: an ephemeral push consumer per js.Subscribe, and
		// a queue group sharing a durable one.
		legacy, err := nc.JetStream()
		if err != nil {
			t.Fatal(err)
		}
		sub, err := legacy.SubscribeSync("events.*", nats.DeliverAll(), nats.AckExplicit())
		if err != nil {
			t.Fatal(err)
		}
		for i := range 4 {
			m, err := sub.NextMsg(testTimeout)
			if err != nil {
				t.Fatal(err)
			}
			if string(m.Data) != fmt.Sprint(i) {
				t.Errorf("legacy subscription got %q, want %d", m.Data, i)
			}
			m.Ack()
		}
		sub.Unsubscribe()
		shared := make(chan string, 10)
		for range 2 {
			qs, err := legacy.QueueSubscribe("events.*", "workers", func(m *nats.Msg) {
				shared <- string(m.Data)
				m.Ack()
			}, nats.Durable("workers"), nats.DeliverAll(), nats.ManualAck())
			if err != nil {
				t.Fatal(err)
			}
			defer qs.Unsubscribe()
		}
		recv := receiveN(t, shared, 4)
		slices.Sort(recv)
		if !slices.Equal(recv, []string{"0", "1", "2", "3"}) {
			t.Errorf("queue group received %q", recv)
		}
	})
}

// receiveN takes n values from ch, failing after testTimeout.
func receiveN(t *testing.T, ch <-chan string, n int) []string {
	t.Helper()
	var got []string
	for len(got) < n {
		select {
		case s := <-ch:
			got = append(got, s)
		case <-time.After(testTimeout):
			t.Fatalf("received %q, then nothing", got)
		}
	}
	return got
}

// An ordered consumer reads a stream in order, as nats.go recreates it.
func TestJetStreamOrderedConsumer(t *testing.T) {
	forEachJetStream(t, func(t *testing.T, srv jsServer) {
		ctx := testContext(t)
		_, js := connectJS(t, srv)
		createStream(t, js, jetstream.StreamConfig{Name: "LOG"}, "0", "1", "2", "3", "4")
		c, err := js.OrderedConsumer(ctx, "LOG", jetstream.OrderedConsumerConfig{FilterSubjects: []string{"log.1", "log.3"}})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for range 2 {
			m, err := c.Next(jetstream.FetchMaxWait(5 * time.Second))
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, string(m.Data()))
		}
		if !slices.Equal(got, []string{"1", "3"}) {
			t.Errorf("ordered consumer read %q", got)
		}
	})
}

// The Key-Value store as nats.go's jetstream.KeyValue uses it: a stream
// KV_<bucket> with per-subject history, roll-ups and direct gets.
func TestJetStreamKeyValue(t *testing.T) {
	forEachJetStream(t, func(t *testing.T, srv jsServer) {
		ctx := testContext(t)
		_, js := connectJS(t, srv)
		kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "config", History: 3})
		if err != nil {
			t.Fatal(err)
		}
		watch, err := kv.WatchAll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer watch.Stop()
		if e := <-watch.Updates(); e != nil {
			t.Fatalf("empty bucket's watcher got %v before its end-of-initial-values marker", e.Key())
		}

		if _, err := kv.Put(ctx, "color", []byte("red")); err != nil {
			t.Fatal(err)
		}
		rev, err := kv.Create(ctx, "size", []byte("L"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Create(ctx, "size", []byte("M")); !errors.Is(err, jetstream.ErrKeyExists) {
			t.Errorf("create of an existing key: %v", err)
		}
		if _, err := kv.Update(ctx, "size", []byte("XL"), rev); err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Update(ctx, "size", []byte("S"), rev); err == nil {
			t.Error("update with a stale revision succeeded")
		}
		for _, v := range []string{"green", "blue", "black"} {
			if _, err := kv.Put(ctx, "color", []byte(v)); err != nil {
				t.Fatal(err)
			}
		}
		e, err := kv.Get(ctx, "color")
		if err != nil || string(e.Value()) != "black" || e.Revision() != 6 {
			t.Fatalf("get color: %v %v", e, err)
		}
		hist, err := kv.History(ctx, "color")
		if err != nil {
			t.Fatal(err)
		}
		var values []string
		for _, h := range hist {
			values = append(values, string(h.Value()))
		}
		if !slices.Equal(values, []string{"green", "blue", "black"}) {
			t.Errorf("history %q (3 kept)", values)
		}
		if err := kv.Delete(ctx, "size"); err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Get(ctx, "size"); !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Errorf("get of a deleted key: %v", err)
		}
		keys, err := kv.Keys(ctx)
		if err != nil || !slices.Equal(keys, []string{"color"}) {
			t.Errorf("keys %q, %v", keys, err)
		}
		if err := kv.Purge(ctx, "color"); err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Get(ctx, "color"); !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Errorf("get of a purged key: %v", err)
		}

		want := []string{"KeyValuePutOp color=red", "KeyValuePutOp size=L", "KeyValuePutOp size=XL",
			"KeyValuePutOp color=green", "KeyValuePutOp color=blue", "KeyValuePutOp color=black",
			"KeyValueDeleteOp size=", "KeyValuePurgeOp color="}
		if seen, err := watchedUpdates(watch, len(want)); err != nil || !slices.Equal(seen, want) {
			// nats-server 2.15.2's watcher (nats.go's ordered push
			// consumer) misses one update now and then (2 runs in 40,
			// one update each: the first or one in the middle), then
			// waits for good; Wharf's has not. The reference's lapse is
			// noted, Wharf's fails the test.
			report := t.Errorf
			if srv.node == nil {
				report = t.Logf
			}
			report("watcher saw %q (%v), want %q", seen, err, want)
		}

		status, err := kv.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if status.History() != 3 || status.Bucket() != "config" {
			t.Errorf("status: history %d, bucket %q", status.History(), status.Bucket())
		}
	})
}

// watchedUpdates reads n updates from a watcher that has sent its
// end-of-initial-values marker.
func watchedUpdates(watch jetstream.KeyWatcher, n int) ([]string, error) {
	var seen []string
	for len(seen) < n {
		select {
		case e, ok := <-watch.Updates():
			if !ok || e == nil {
				return seen, fmt.Errorf("then its channel closed (%v) or a second end-of-initial-values marker", ok)
			}
			seen = append(seen, fmt.Sprintf("%s %s=%s", e.Operation(), e.Key(), e.Value()))
		case <-time.After(testTimeout / 2):
			return seen, errors.New("then nothing")
		}
	}
	return seen, nil
}

// ack_policy all settles every delivery up to the one acknowledged, and
// max_ack_pending holds back new deliveries while that many await acks.
func TestJetStreamAckAllAndMaxAckPending(t *testing.T) {
	forEachJetStream(t, func(t *testing.T, srv jsServer) {
		ctx := testContext(t)
		_, js := connectJS(t, srv)
		s := createStream(t, js, jetstream.StreamConfig{Name: "WORK"}, "0", "1", "2", "3", "4", "5", "6")
		c, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "w", AckPolicy: jetstream.AckAllPolicy, MaxAckPending: 3})
		if err != nil {
			t.Fatal(err)
		}
		fetch := func() []jetstream.Msg {
			batch, err := c.Fetch(10, jetstream.FetchMaxWait(500*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			var msgs []jetstream.Msg
			for m := range batch.Messages() {
				msgs = append(msgs, m)
			}
			return msgs
		}
		first := fetch()
		if len(first) != 3 {
			t.Fatalf("fetched %d with max_ack_pending 3", len(first))
		}
		if more := fetch(); len(more) != 0 {
			t.Fatalf("fetched %d more while 3 awaited acks", len(more))
		}
		if err := first[1].DoubleAck(ctx); err != nil { // settles 0 and 1
			t.Fatal(err)
		}
		info, err := c.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.NumAckPending != 1 || info.AckFloor.Stream != 2 {
			t.Errorf("after acking the second of three with ack all: %d pending, ack floor %+v", info.NumAckPending, info.AckFloor)
		}
		var got []string
		for _, m := range fetch() {
			got = append(got, string(m.Data()))
		}
		if !slices.Equal(got, []string{"3", "4"}) {
			t.Errorf("then fetched %q, want [3 4]", got)
		}
	})
}

// A push consumer with idle_heartbeat sends heartbeats to its deliver
// subject while there is nothing to deliver.
func TestJetStreamPushHeartbeat(t *testing.T) {
	forEachJetStream(t, func(t *testing.T, srv jsServer) {
		ctx := testContext(t)
		nc, js := connectJS(t, srv)
		s := createStream(t, js, jetstream.StreamConfig{Name: "IDLE"})
		sub, err := nc.SubscribeSync("hb.deliver")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreateOrUpdatePushConsumer(ctx, jetstream.ConsumerConfig{Durable: "hb", DeliverSubject: "hb.deliver",
			IdleHeartbeat: 200 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		got := fmt.Sprint(m.Header.Get("Status"), " ", m.Header.Get("Description"), " last consumer ", m.Header.Get("Nats-Last-Consumer"),
			" last stream ", m.Header.Get("Nats-Last-Stream"))
		if got != "100 Idle Heartbeat last consumer 0 last stream 0" {
			t.Errorf("push consumer's first message: %s", got)
		}
	})
}
