package e2e

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/wharf-mq/wharf/internal/node"
)

// NATS subjects and amq.topic of vhost "/" are one routing space
// (internal/subjectbridge): each test drives one node with nats.go and
// amqp091-go.

// bridgeSides starts a node with NATS and AMQP listeners and returns a
// NATS connection and an AMQP channel to it.
func bridgeSides(t *testing.T, cfg func(*node.Config)) (*node.Node, *nats.Conn, *amqp091.Channel) {
	t.Helper()
	n := startNATSNode(t, cfg)
	return n, natsConn(t, n), streamChannel(t, n)
}

func natsConn(t *testing.T, n *node.Node) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect("nats://" + n.NATSAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// bindQueue declares a transient queue and binds it to amq.topic with
// each key.
func bindQueue(t *testing.T, ch *amqp091.Channel, queue string, keys ...string) {
	t.Helper()
	if _, err := ch.QueueDeclare(queue, false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if err := ch.QueueBind(queue, k, "amq.topic", false, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// getAll takes every ready message of queue with basic.get.
func getAll(t *testing.T, ch *amqp091.Channel, queue string) []amqp091.Delivery {
	t.Helper()
	var out []amqp091.Delivery
	for {
		d, ok, err := ch.Get(queue, true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		out = append(out, d)
	}
}

func routingKeysOf(ds []amqp091.Delivery) []string {
	var keys []string
	for _, d := range ds {
		keys = append(keys, d.RoutingKey)
	}
	return keys
}

// publishNATS publishes to each subject and waits until the node has
// handled them (a PING answered after them).
func publishNATS(t *testing.T, nc *nats.Conn, subjects ...string) {
	t.Helper()
	for _, s := range subjects {
		if err := nc.Publish(s, []byte("from nats: "+s)); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.FlushTimeout(testTimeout); err != nil {
		t.Fatal(err)
	}
}

// publishTopic publishes to amq.topic in confirm mode and waits for the
// confirm, by which time the node has routed the message.
func publishTopic(t *testing.T, ch *amqp091.Channel, key string, mandatory bool, p amqp091.Publishing) {
	t.Helper()
	dc, err := ch.PublishWithDeferredConfirmWithContext(testContext(t), "amq.topic", key, mandatory, false, p)
	if err != nil {
		t.Fatal(err)
	}
	if dc == nil {
		t.Fatal("channel not in confirm mode")
	}
	if ok, err := dc.WaitContext(testContext(t)); err != nil || !ok {
		t.Fatalf("publish to amq.topic %q: ack %v, %v", key, ok, err)
	}
}

func confirmChannel(t *testing.T, ch *amqp091.Channel) {
	t.Helper()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
}

// TestNATSPublishReachesBoundQueues: a NATS publish reaches the AMQP queues
// whose amq.topic bindings match its subject, as an AMQP publish with that
// routing key would ('*' one word, '#' zero or more), each queue once.
func TestNATSPublishReachesBoundQueues(t *testing.T) {
	_, nc, ch := bridgeSides(t, nil)
	bindings := map[string][]string{
		"star":      {"orders.*"},
		"hash":      {"orders.#"},
		"all":       {"#"},
		"middle":    {"*.eu.#"},
		"widened":   {"orders.#.new"},
		"exact":     {"orders.eu"},
		"two-binds": {"orders.*", "*.eu"},
	}
	for q, keys := range bindings {
		bindQueue(t, ch, q, keys...)
	}
	published := []string{"orders", "orders.eu", "orders.eu.new", "orders.us.old.new", "stock.eu", "x.eu.y", "other"}
	publishNATS(t, nc, published...)
	want := map[string][]string{
		"star":      {"orders.eu"},
		"hash":      {"orders", "orders.eu", "orders.eu.new", "orders.us.old.new"},
		"all":       published,
		"middle":    {"orders.eu", "orders.eu.new", "stock.eu", "x.eu.y"},
		"widened":   {"orders.eu.new", "orders.us.old.new"},
		"exact":     {"orders.eu"},
		"two-binds": {"orders.eu", "stock.eu"},
	}
	for q, keys := range want {
		ds := getAll(t, ch, q)
		if got := routingKeysOf(ds); !slices.Equal(got, keys) {
			t.Errorf("queue %s (bound %q) got %q, want %q", q, bindings[q], got, keys)
		}
		for _, d := range ds {
			if d.Exchange != "amq.topic" || string(d.Body) != "from nats: "+d.RoutingKey || d.DeliveryMode == amqp091.Persistent {
				t.Errorf("queue %s: delivery exchange %q body %q mode %d", q, d.Exchange, d.Body, d.DeliveryMode)
			}
		}
	}
}

// TestAMQPTopicReachesNATSSubscribers: a message amq.topic routes reaches
// the NATS subscribers of its routing key ('*' and '>'); one a NATS
// subscriber takes counts as routed (a mandatory publish is not
// returned); routing keys that are no NATS subject and messages over
// max_payload stay on the AMQP side.
func TestAMQPTopicReachesNATSSubscribers(t *testing.T) {
	_, nc, ch := bridgeSides(t, func(c *node.Config) { c.NATS.MaxPayload = 1024 })
	patterns := []string{"orders.*", "orders.>", ">", "*.eu"}
	subs := map[string]*nats.Subscription{}
	for _, p := range patterns {
		sub, err := nc.SubscribeSync(p)
		if err != nil {
			t.Fatal(err)
		}
		subs[p] = sub
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	confirmChannel(t, ch)
	returns := ch.NotifyReturn(make(chan amqp091.Return, 10))
	for _, key := range []string{"orders.eu", "orders.eu.new", "stock.eu", "bad key", "a..b", "orders.*"} {
		publishTopic(t, ch, key, true, amqp091.Publishing{Body: []byte(key)})
	}
	publishTopic(t, ch, "orders.big", true, amqp091.Publishing{Body: make([]byte, 2048)})
	if err := ch.PublishWithContext(testContext(t), "amq.direct", "orders.eu", false, false, amqp091.Publishing{Body: []byte("direct")}); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"orders.*": {"orders.eu"},
		"orders.>": {"orders.eu", "orders.eu.new"},
		">":        {"orders.eu", "orders.eu.new", "stock.eu"},
		"*.eu":     {"orders.eu", "stock.eu"},
	}
	for p, subjects := range want {
		if got := nextSubjects(t, subs[p], len(subjects)); !slices.Equal(got, subjects) {
			t.Errorf("NATS subscriber of %q got %q, want %q", p, got, subjects)
		}
	}
	// Messages to one connection arrive in order: once "end" is there,
	// nothing published before it is still on its way.
	publishTopic(t, ch, "end", false, amqp091.Publishing{})
	if m, err := subs[">"].NextMsg(testTimeout); err != nil || m.Subject != "end" {
		t.Fatalf("NATS subscriber of \">\": %v, %v; want end", m, err)
	}
	for p, sub := range subs {
		if n, _, _ := sub.Pending(); n != 0 {
			t.Errorf("NATS subscriber of %q has %d more messages", p, n)
		}
	}
	var returned []string
	for len(returns) > 0 {
		returned = append(returned, (<-returns).RoutingKey)
	}
	if want := []string{"bad key", "a..b", "orders.*", "orders.big"}; !slices.Equal(returned, want) {
		t.Errorf("mandatory publishes returned %q, want %q (the others reached NATS subscribers)", returned, want)
	}
}

// nextSubjects receives n messages and returns their subjects, sorted.
func nextSubjects(t *testing.T, sub *nats.Subscription, n int) []string {
	t.Helper()
	var out []string
	for range n {
		m, err := sub.NextMsg(testTimeout)
		if err != nil {
			t.Fatalf("subscriber of %q after %q: %v", sub.Subject, out, err)
		}
		out = append(out, m.Subject)
	}
	sort.Strings(out)
	return out
}

// TestBridgedHeaders: NATS headers are the AMQP headers table (several
// values: an array), Content-Type is content_type, the reply subject is
// reply_to, in both directions.
func TestBridgedHeaders(t *testing.T) {
	_, nc, ch := bridgeSides(t, nil)
	bindQueue(t, ch, "headers", "h.from-nats")
	m := nats.NewMsg("h.from-nats")
	m.Reply = "inbox.nats"
	m.Header.Add("X-Id", "1")
	m.Header.Add("X-Id", "2")
	m.Header.Set("Content-Type", "application/json")
	m.Data = []byte(`{"a":1}`)
	if err := nc.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
	publishNATS(t, nc)
	ds := getAll(t, ch, "headers")
	if len(ds) != 1 {
		t.Fatalf("queue got %d messages, want 1", len(ds))
	}
	d := ds[0]
	if got := fmt.Sprint(d.Headers["X-Id"]); got != "[1 2]" || d.ContentType != "application/json" || d.ReplyTo != "inbox.nats" || len(d.Headers) != 1 {
		t.Errorf("AMQP delivery: headers %v, content type %q, reply_to %q", d.Headers, d.ContentType, d.ReplyTo)
	}

	sub, err := nc.SubscribeSync("h.from-amqp")
	if err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	confirmChannel(t, ch)
	publishTopic(t, ch, "h.from-amqp", false, amqp091.Publishing{
		ContentType: "text/plain", ReplyTo: "inbox.amqp", DeliveryMode: amqp091.Persistent,
		Headers: amqp091.Table{"n": int64(7), "s": "v", "list": []any{"x", "y"}},
		Body:    []byte("body"),
	})
	got, err := sub.NextMsg(testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	h := got.Header
	if h.Get("n") != "7" || h.Get("s") != "v" || !slices.Equal(h.Values("list"), []string{"x", "y"}) ||
		h.Get("Content-Type") != "text/plain" || got.Reply != "inbox.amqp" || string(got.Data) != "body" {
		t.Errorf("NATS message: header %v, reply %q, data %q", h, got.Reply, got.Data)
	}
}

// TestRequestReplyAcrossProtocols: a NATS request served by an AMQP
// consumer (which replies through amq.topic to reply_to), and an AMQP
// request served by a NATS responder (the reply reaches the requester's
// queue bound to amq.topic with its name). A NATS request that only an
// AMQP queue receives gets no 503 no-responders.
func TestRequestReplyAcrossProtocols(t *testing.T) {
	n, nc, ch := bridgeSides(t, nil)
	bindQueue(t, ch, "price-service", "rpc.price.*")
	requests, err := ch.Consume("price-service", "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	serviceCh := streamChannel(t, n)
	var served sync.WaitGroup
	served.Go(func() {
		for d := range requests { // ends when ch closes
			serviceCh.PublishWithContext(context.Background(), "amq.topic", d.ReplyTo, false, false,
				amqp091.Publishing{Body: []byte("42:" + d.RoutingKey + ":" + string(d.Body))})
		}
	})
	t.Cleanup(func() {
		ch.Close()
		served.Wait()
	})
	reply, err := nc.Request("rpc.price.eu", []byte("q"), testTimeout)
	if err != nil {
		t.Fatalf("NATS request served over AMQP: %v", err)
	}
	if string(reply.Data) != "42:rpc.price.eu:q" {
		t.Fatalf("reply %q", reply.Data)
	}

	responder := natsConn(t, n)
	if _, err := responder.Subscribe("svc.echo", func(m *nats.Msg) { m.Respond(append([]byte("echo:"), m.Data...)) }); err != nil {
		t.Fatal(err)
	}
	responder.Flush()
	replyQueue, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(replyQueue.Name, replyQueue.Name, "amq.topic", false, nil); err != nil {
		t.Fatal(err)
	}
	replies, err := ch.Consume(replyQueue.Name, "", true, true, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.PublishWithContext(testContext(t), "amq.topic", "svc.echo", false, false,
		amqp091.Publishing{ReplyTo: replyQueue.Name, Body: []byte("hi")}); err != nil {
		t.Fatal(err)
	}
	if d := nextDelivery(t, replies); string(d.Body) != "echo:hi" || d.RoutingKey != replyQueue.Name {
		t.Fatalf("AMQP requester got %q on %q", d.Body, d.RoutingKey)
	}
}

// TestBindingsChangeAtRunTime: a binding added while NATS clients publish
// takes effect at once, and so does its removal (then a NATS request gets
// 503 no-responders again), whether by unbind or by deleting the queue.
func TestBindingsChangeAtRunTime(t *testing.T) {
	_, nc, ch := bridgeSides(t, nil)
	if _, err := nc.Request("live.1", nil, testTimeout); err != nats.ErrNoResponders {
		t.Fatalf("before any binding: %v, want no responders", err)
	}
	bindQueue(t, ch, "live", "live.*")
	publishNATS(t, nc, "live.2")
	if err := ch.QueueUnbind("live", "live.*", "amq.topic", nil); err != nil {
		t.Fatal(err)
	}
	publishNATS(t, nc, "live.3")
	if got := routingKeysOf(getAll(t, ch, "live")); !slices.Equal(got, []string{"live.2"}) {
		t.Fatalf("queue got %q, want only what was published while bound", got)
	}
	if _, err := nc.Request("live.4", nil, testTimeout); err != nats.ErrNoResponders {
		t.Fatalf("after unbind: %v, want no responders", err)
	}
	bindQueue(t, ch, "live", "live.#")
	publishNATS(t, nc, "live.5")
	if purged, err := ch.QueueDelete("live", false, false, false); err != nil || purged != 1 {
		t.Fatalf("deleting the queue: %d messages, %v; want live.5", purged, err)
	}
	if _, err := nc.Request("live.6", nil, testTimeout); err != nats.ErrNoResponders {
		t.Fatalf("after the queue was deleted: %v, want no responders", err)
	}
}

// TestQueueGroupBesideCompetingConsumers: a NATS queue group and an AMQP
// queue with competing consumers on the same subjects each get every
// message once, whichever side publishes: one member of the group, one
// consumer of the queue.
func TestQueueGroupBesideCompetingConsumers(t *testing.T) {
	n, nc, ch := bridgeSides(t, nil)
	const perSide = 200
	type receipt struct{ side, member, body string }
	got := make(chan receipt, 8*perSide) // room for duplicates, were there any

	for i := range 2 {
		member := natsConn(t, n)
		name := fmt.Sprint("nats-", i)
		if _, err := member.QueueSubscribe("work.>", "workers", func(m *nats.Msg) {
			got <- receipt{"nats", name, string(m.Data)}
		}); err != nil {
			t.Fatal(err)
		}
		member.Flush()
	}
	bindQueue(t, ch, "work", "work.#")
	var consumers sync.WaitGroup
	var channels []*amqp091.Channel
	t.Cleanup(func() {
		for _, c := range channels {
			c.Close()
		}
		consumers.Wait()
	})
	for i := range 2 {
		cch := streamChannel(t, n)
		channels = append(channels, cch)
		ds, err := cch.Consume("work", fmt.Sprint("amqp-", i), true, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprint("amqp-", i)
		consumers.Go(func() {
			for d := range ds { // ends when cch closes
				got <- receipt{"amqp", name, string(d.Body)}
			}
		})
	}

	for i := range perSide {
		if err := nc.Publish("work.item", []byte(fmt.Sprint("n", i))); err != nil {
			t.Fatal(err)
		}
	}
	nc.Flush()
	confirmChannel(t, ch)
	for i := range perSide {
		publishTopic(t, ch, "work.item", false, amqp091.Publishing{Body: []byte(fmt.Sprint("a", i))})
	}
	bodies := map[string]map[string]int{"nats": {}, "amqp": {}}
	members := map[string]int{}
	deadline := time.After(testTimeout)
	for range 4 * perSide {
		select {
		case r := <-got:
			bodies[r.side][r.body]++
			members[r.member]++
		case <-deadline:
			t.Fatalf("timed out; members got %v", members)
		}
	}
	for side, seen := range bodies {
		if len(seen) != 2*perSide {
			t.Errorf("%s side got %d distinct messages, want %d", side, len(seen), 2*perSide)
		}
		for body, k := range seen {
			if k != 1 {
				t.Errorf("%s side got %q %d times", side, body, k)
			}
		}
	}
	for _, m := range []string{"nats-0", "nats-1", "amqp-0", "amqp-1"} {
		if members[m] == 0 {
			t.Errorf("member %s got nothing: %v", m, members)
		}
	}
}

// TestNoLoops: with a NATS subscriber on every subject and an AMQP queue
// bound with '#', a message from either side reaches each exactly once.
func TestNoLoops(t *testing.T) {
	n, nc, ch := bridgeSides(t, nil)
	listener := natsConn(t, n)
	all, err := listener.SubscribeSync(">")
	if err != nil {
		t.Fatal(err)
	}
	listener.Flush()
	bindQueue(t, ch, "everything", "#")
	confirmChannel(t, ch)

	publishNATS(t, nc, "loop.from-nats")
	publishTopic(t, ch, "loop.from-amqp", false, amqp091.Publishing{Body: []byte("x")})
	if err := listener.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := nextSubjects(t, all, 2); !slices.Equal(got, []string{"loop.from-amqp", "loop.from-nats"}) {
		t.Fatalf("NATS subscriber got %q", got)
	}
	if n, _, _ := all.Pending(); n != 0 {
		t.Fatalf("NATS subscriber got %d more", n)
	}
	if got := routingKeysOf(getAll(t, ch, "everything")); !slices.Equal(got, []string{"loop.from-nats", "loop.from-amqp"}) {
		t.Fatalf("AMQP queue got %q", got)
	}
}

// TestNATSIntoQueuesStopsAtMemoryMark: NATS publishers cannot grow AMQP
// queues past the memory high-water mark (NATS has no way to hold them
// back): what passes it is dropped, and the NATS connection stays up.
func TestNATSIntoQueuesStopsAtMemoryMark(t *testing.T) {
	const mark = 64 << 10
	_, nc, ch := bridgeSides(t, func(c *node.Config) { c.AMQP.MemoryHighWatermark = mark })
	bindQueue(t, ch, "unconsumed", "fill.#")
	body := []byte(strings.Repeat("x", 1024))
	const sent = 1000
	for range sent {
		if err := nc.Publish("fill.up", body); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.FlushTimeout(testTimeout); err != nil {
		t.Fatalf("NATS connection after the mark: %v", err)
	}
	q, err := ch.QueueDeclarePassive("unconsumed", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if q.Messages == 0 || q.Messages*len(body) > mark+len(body) {
		t.Fatalf("queue holds %d messages of %d B (mark %d B, %d sent)", q.Messages, len(body), mark, sent)
	}
}

// TestNATSOpenToTheNetworkIsNotBridged: a NATS listener on every interface
// with no authentication must not reach AMQP's queues, where guest may log
// in from loopback only and every user's permissions are checked; with a
// token it is bridged.
func TestNATSOpenToTheNetworkIsNotBridged(t *testing.T) {
	for _, c := range []struct {
		name    string
		token   string
		bridged bool
	}{
		{"no authentication", "", false},
		{"token", "bridge-token", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := startNATSNode(t, func(cfg *node.Config) {
				cfg.NATSAddr = "0.0.0.0:0"
				cfg.NATS.Token = c.token
			})
			_, port, err := net.SplitHostPort(n.NATSAddr())
			if err != nil {
				t.Fatal(err)
			}
			nc, err := nats.Connect("nats://127.0.0.1:"+port, nats.Token(c.token))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(nc.Close)
			ch := streamChannel(t, n)
			bindQueue(t, ch, "from-nats", "orders.#")
			publishNATS(t, nc, "orders.created")
			got := getAll(t, ch, "from-nats")
			if bridged := len(got) > 0; bridged != c.bridged {
				t.Fatalf("the NATS publish reached the bound AMQP queue: %v, want %v", bridged, c.bridged)
			}
		})
	}
}
