package nats_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// A behaviour is something a nats.go application does; it returns what
// the application observed, as text, so that the two servers' outcomes
// can be compared.
type behaviour struct {
	name   string
	limits limits
	run    func(t *testing.T, s server) string
	want   string
}

var behaviours = []behaviour{
	{name: "wildcards", run: wildcards,
		want: "*.b.c=[a.b.c x.b.c] >=[a a.b a.b.c x.b.c] a.*=[a.b] a.>=[a.b a.b.c]"},
	{name: "queue groups", run: queueGroups, want: "plain=300 group=300 every member got some"},
	{name: "request-reply", run: requestReply, want: "reply=pong:ping"},
	{name: "no responders", run: noResponders, want: "nats: no responders available for request"},
	{name: "headers", run: headers, want: "data=body X-Id=[1 2] Other=[v]"},
	{name: "echo off", run: echoOff, want: "from-other"},
	{name: "auto-unsubscribe", run: autoUnsubscribe, want: "received=[0 1] valid=false"},
	{name: "drain", run: drain, want: "handled 200 of 200, closed"},
	{name: "auth: user and password", limits: limits{users: map[string]string{"alice": "secret"}}, run: userAuth,
		want: "good=ok bad=nats: Authorization Violation none=nats: Authorization Violation"},
	{name: "auth: token", limits: limits{token: "s3cr3t"}, run: tokenAuth,
		want: "good=ok bad=nats: Authorization Violation"},
	{name: "max payload", limits: limits{maxPayload: 1024}, run: maxPayload,
		want: "announced=1024 at limit=ok over=nats: maximum payload exceeded"},
	// A cluster node serves no JetStream (internal/node/jetstream.go).
	{name: "JetStream off", run: jetStreamOff,
		want: "info=<nil> account=nats: jetstream not enabled create=nats: no responders available for request"},
	{name: "JetStream announced", limits: limits{jetStream: true}, run: jetStreamAnnounced, want: "info=true"},
}

func TestClientBehaviours(t *testing.T) {
	t.Parallel()
	for _, b := range behaviours {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			for _, s := range bothServers(t, b.limits) {
				if got := b.run(t, s); got != b.want {
					t.Errorf("%s: %s\nwant %s", s.name, got, b.want)
				}
			}
		})
	}
}

func connect(t *testing.T, s server, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.url(), opts...)
	if err != nil {
		t.Fatalf("%s: connect: %v", s.name, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func wildcards(t *testing.T, s server) string {
	nc := connect(t, s)
	patterns := []string{"a.*", "a.>", "*.b.c", ">"}
	subs := map[string]*nats.Subscription{}
	for _, p := range patterns {
		sub, err := nc.SubscribeSync(p)
		if err != nil {
			t.Fatal(err)
		}
		subs[p] = sub
	}
	for _, subj := range []string{"a", "a.b", "a.b.c", "x.b.c"} {
		nc.Publish(subj, nil)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(patterns)
	var out []string
	for _, p := range patterns {
		out = append(out, fmt.Sprintf("%s=%v", p, received(t, subs[p], func(m *nats.Msg) string { return m.Subject })))
	}
	return strings.Join(out, " ")
}

func queueGroups(t *testing.T, s server) string {
	pub, subConn := connect(t, s), connect(t, s)
	const n = 300
	var plain, group atomic.Int64
	var members [3]atomic.Int64
	var wg sync.WaitGroup
	wg.Add(2 * n)
	subConn.Subscribe("jobs.*", func(*nats.Msg) { plain.Add(1); wg.Done() })
	for i := range members {
		c := connect(t, s)
		c.QueueSubscribe("jobs.>", "workers", func(*nats.Msg) { members[i].Add(1); group.Add(1); wg.Done() })
		c.Flush()
	}
	subConn.Flush()
	for range n {
		pub.Publish("jobs.new", []byte("x"))
	}
	pub.Flush()
	if !waitGroup(&wg) {
		return fmt.Sprintf("timed out: plain=%d group=%d", plain.Load(), group.Load())
	}
	spread := "every member got some"
	for i := range members {
		if members[i].Load() == 0 {
			spread = fmt.Sprintf("member %d got none", i)
		}
	}
	return fmt.Sprintf("plain=%d group=%d %s", plain.Load(), group.Load(), spread)
}

func requestReply(t *testing.T, s server) string {
	responder, requester := connect(t, s), connect(t, s)
	responder.Subscribe("svc.echo", func(m *nats.Msg) { m.Respond(append([]byte("pong:"), m.Data...)) })
	responder.Flush()
	reply, err := requester.Request("svc.echo", []byte("ping"), testTimeout)
	if err != nil {
		return err.Error()
	}
	return "reply=" + string(reply.Data)
}

func noResponders(t *testing.T, s server) string {
	nc := connect(t, s)
	_, err := nc.Request("nobody.home", []byte("?"), testTimeout)
	if !errors.Is(err, nats.ErrNoResponders) {
		return fmt.Sprintf("unexpected: %v", err)
	}
	return err.Error()
}

func headers(t *testing.T, s server) string {
	pub, subConn := connect(t, s), connect(t, s)
	sub, _ := subConn.SubscribeSync("h")
	subConn.Flush()
	msg := nats.NewMsg("h")
	msg.Data = []byte("body")
	msg.Header.Add("X-Id", "1")
	msg.Header.Add("X-Id", "2")
	msg.Header.Set("Other", "v")
	if err := pub.PublishMsg(msg); err != nil {
		t.Fatal(err)
	}
	m, err := sub.NextMsg(testTimeout)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("data=%s X-Id=%v Other=%v", m.Data, m.Header.Values("X-Id"), m.Header.Values("Other"))
}

func echoOff(t *testing.T, s server) string {
	quiet, other := connect(t, s, nats.NoEcho()), connect(t, s)
	sub, _ := quiet.SubscribeSync("chat")
	quiet.Flush()
	quiet.Publish("chat", []byte("from-self"))
	quiet.Flush()
	other.Publish("chat", []byte("from-other"))
	other.Flush()
	quiet.Flush() // the server queued other's message to quiet before this PONG
	return strings.Join(received(t, sub, func(m *nats.Msg) string { return string(m.Data) }), ",")
}

func autoUnsubscribe(t *testing.T, s server) string {
	nc := connect(t, s)
	sub, _ := nc.SubscribeSync("limited")
	sub.AutoUnsubscribe(2)
	nc.Flush()
	for i := range 5 {
		nc.Publish("limited", []byte(fmt.Sprint(i)))
	}
	nc.Flush()
	var got []string
	for {
		// The client ends the subscription itself after the second
		// message: the third NextMsg fails at once.
		m, err := sub.NextMsg(testTimeout)
		if err != nil {
			break
		}
		got = append(got, string(m.Data))
	}
	return fmt.Sprintf("received=%v valid=%v", got, sub.IsValid())
}

func drain(t *testing.T, s server) string {
	pub := connect(t, s)
	closed := make(chan struct{})
	subConn := connect(t, s, nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
	const n = 200
	var handled atomic.Int64
	subConn.Subscribe("work", func(*nats.Msg) {
		time.Sleep(100 * time.Microsecond) // a handler with some work to do
		handled.Add(1)
	})
	subConn.Flush()
	for range n {
		pub.Publish("work", []byte("x"))
	}
	pub.Flush()
	// Make sure the subscriber's connection has read everything before
	// draining (a PING round trip after the publisher's flush).
	subConn.Flush()
	if err := subConn.Drain(); err != nil {
		return err.Error()
	}
	select {
	case <-closed:
	case <-time.After(testTimeout):
		return "drain did not close the connection"
	}
	return fmt.Sprintf("handled %d of %d, closed", handled.Load(), n)
}

func connectResult(s server, opts ...nats.Option) string {
	nc, err := nats.Connect(s.url(), opts...)
	if err != nil {
		return err.Error()
	}
	nc.Close()
	return "ok"
}

func userAuth(t *testing.T, s server) string {
	return fmt.Sprintf("good=%s bad=%s none=%s",
		connectResult(s, nats.UserInfo("alice", "secret")),
		connectResult(s, nats.UserInfo("alice", "wrong")),
		connectResult(s))
}

func tokenAuth(t *testing.T, s server) string {
	return fmt.Sprintf("good=%s bad=%s", connectResult(s, nats.Token("s3cr3t")), connectResult(s, nats.Token("nope")))
}

func maxPayload(t *testing.T, s server) string {
	nc := connect(t, s)
	sub, _ := nc.SubscribeSync("big")
	nc.Flush()
	atLimit := "ok"
	if err := nc.Publish("big", make([]byte, 1024)); err != nil {
		atLimit = err.Error()
	} else if _, err := sub.NextMsg(testTimeout); err != nil {
		atLimit = err.Error()
	}
	over := "accepted"
	if err := nc.Publish("big", make([]byte, 1025)); err != nil {
		over = err.Error()
	}
	return fmt.Sprintf("announced=%d at limit=%s over=%s", nc.MaxPayload(), atLimit, over)
}

// received returns what a synchronous subscription holds, once its
// connection was flushed: every message the server sent it by then.
func received(t *testing.T, sub *nats.Subscription, show func(*nats.Msg) string) []string {
	n, _, err := sub.Pending()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for range n {
		m, err := sub.NextMsg(testTimeout)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, show(m))
	}
	return got
}

// waitGroup waits for wg up to testTimeout.
func waitGroup(wg *sync.WaitGroup) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(testTimeout):
		return false
	}
}
