package mq

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/rate"
)

// fakeClients stands for a node's AMQP front end: the clients a test
// gives it, and the connections it was asked to close.
type fakeClients struct {
	consumers   []ConsumerDetail
	connections []ConnectionDetail

	mu     sync.Mutex
	closed []string // "name: reason"
}

func (f *fakeClients) ConsumerDetails() []ConsumerDetail     { return f.consumers }
func (f *fakeClients) ConnectionDetails() []ConnectionDetail { return f.connections }

func (f *fakeClients) CloseConnection(name, reason string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = append(f.closed, name+": "+reason)
	return slices.ContainsFunc(f.connections, func(c ConnectionDetail) bool { return c.Name == name })
}

func (f *fakeClients) closes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.closed)
}

// TestConnectionsOfOtherNodes: node 3 lists the connections of the
// clients of nodes 1 and 2, each with its node, channels, TLS and client
// properties (their field types kept), narrowed to a vhost or a name by
// the nodes themselves, and their totals by user; it closes node 2's connection on node 2, with the
// reason; node 2 out of contact is named, and a close there fails at once.
func TestConnectionsOfOtherNodes(t *testing.T) {
	envs, calls := newClassicEnvs(t, 3)
	connection := func(vhost string, port int) ConnectionDetail {
		return ConnectionDetail{Name: fmt.Sprintf("127.0.0.1:%d -> 127.0.0.1:5672", port), User: "guest", VHost: vhost,
			PeerHost: "127.0.0.1", PeerPort: port, Host: "127.0.0.1", Port: 5672, AuthMechanism: "PLAIN",
			ConnectedAt: time.UnixMilli(1700000000000), Heartbeat: 60 * time.Second, ChannelMax: 2047, FrameMax: 131072,
			ClientProperties: amqpwire.Table{"product": "amqp091-go", "capabilities": amqpwire.Table{"publisher_confirms": true}},
			Traffic:          []rate.Stat{{Name: "recv_oct", Value: 100, Rate: 1.5}},
			TLS:              &TLSDetail{Protocol: "tlsv1.3", Cipher: "TLS_AES_128_GCM_SHA256"},
			Channels: []ChannelDetail{{Number: 1, Prefetch: 10, Confirm: true, Unconfirmed: 2, Consumers: 3,
				MessageStats: []rate.Stat{{Name: "publish", Value: 7}}}},
		}
	}
	one := &fakeClients{connections: []ConnectionDetail{connection("/", 1001), connection("other", 1002)}}
	two := &fakeClients{connections: []ConnectionDetail{connection("/", 2001)}}
	two.connections[0].User = "carol"
	envs[0].v.r.ServeClientsWith(one)
	envs[1].v.r.ServeClientsWith(two)
	envs[2].v.r.ServeClientsWith(&fakeClients{connections: []ConnectionDetail{connection("/", 3001)}})
	node3 := envs[2].v.r

	listed := func(vhost, name string) ([]string, []int32) {
		cs, unanswered := node3.ConnectionsElsewhere(context.Background(), vhost, name)
		var out []string
		for _, c := range cs {
			ch := c.Channels[0]
			out = append(out, fmt.Sprintf("%s %s node %d %s %T %v heartbeat %v tls %s traffic %v channel %d prefetch %d confirm %v consumers %d %v",
				c.VHost, c.Name, c.Node, c.ClientProperties["product"], c.ClientProperties["capabilities"].(amqpwire.Table)["publisher_confirms"],
				c.ConnectedAt.UnixMilli(), c.Heartbeat, c.TLS.Protocol, c.Traffic, ch.Number, ch.Prefetch, ch.Confirm, ch.Consumers, ch.MessageStats))
		}
		slices.Sort(out)
		return out, unanswered
	}
	shown := func(vhost string, port, node int) string {
		return fmt.Sprintf("%s 127.0.0.1:%d -> 127.0.0.1:5672 node %d amqp091-go bool 1700000000000 heartbeat 1m0s tls tlsv1.3 traffic [{recv_oct 100 1.5}] channel 1 prefetch 10 confirm true consumers 3 [{publish 7 0}]",
			vhost, port, node)
	}
	want := []string{shown("/", 1001, 1), shown("/", 2001, 2), shown("other", 1002, 1)}
	if got, unanswered := listed("", ""); !slices.Equal(got, want) || len(unanswered) != 0 {
		t.Fatalf("node 3 lists %q, unanswered %v; want %q", got, unanswered, want)
	}
	if got, _ := listed("other", ""); !slices.Equal(got, want[2:]) {
		t.Fatalf("node 3 lists of vhost other %q", got)
	}
	if got, _ := listed("", "127.0.0.1:2001 -> 127.0.0.1:5672"); !slices.Equal(got, want[1:2]) {
		t.Fatalf("node 3 lists of node 2's connection's name %q", got)
	}

	ctx := context.Background()
	totals, unanswered := node3.ClientTotalsElsewhere(ctx)
	slices.SortFunc(totals, func(a, b ClientTotals) int { return strings.Compare(a.User, b.User) })
	if got := fmt.Sprint(totals); got != "[{carol 1 1 3} {guest 2 2 6}]" || len(unanswered) != 0 {
		t.Fatalf("node 3 counts %s, unanswered %v; want carol's 1 connection, 1 channel, 3 consumers and guest's 2, 2, 6", got, unanswered)
	}
	closed, err := node3.CloseConnectionOn(ctx, 2, "127.0.0.1:2001 -> 127.0.0.1:5672", "go away")
	if err != nil || !closed || !slices.Equal(two.closes(), []string{"127.0.0.1:2001 -> 127.0.0.1:5672: go away"}) || len(one.closes()) != 0 {
		t.Fatalf("a close of node 2's connection: %v, %v; node 2 closed %q, node 1 %q", closed, err, two.closes(), one.closes())
	}
	if closed, err := node3.CloseConnectionOn(ctx, 1, "127.0.0.1:9 -> 127.0.0.1:5672", "x"); err != nil || closed {
		t.Fatalf("a close of a connection node 1 does not have: %v, %v", closed, err)
	}

	calls.setDown(2, true)
	if got, unanswered := listed("", ""); !slices.Equal(got, []string{want[0], want[2]}) || !slices.Equal(unanswered, []int32{2}) {
		t.Fatalf("with node 2 out of contact node 3 lists %q, unanswered %v", got, unanswered)
	}
	if _, err := node3.CloseConnectionOn(ctx, 2, "127.0.0.1:2001 -> 127.0.0.1:5672", "x"); !errors.Is(err, ErrNodeUnanswered) {
		t.Fatalf("a close on node 2 out of contact: %v", err)
	}
}

// TestClientsOfNodeWithoutFrontEnd: a node whose AMQP front end is not up
// has no clients: it answers empty, not with an error.
func TestClientsOfNodeWithoutFrontEnd(t *testing.T) {
	envs, _ := newClassicEnvs(t, 2)
	cs, unanswered := envs[1].v.r.ConnectionsElsewhere(context.Background(), "", "")
	ks, _ := envs[1].v.r.ConsumersElsewhere(context.Background(), "", "")
	ts, _ := envs[1].v.r.ClientTotalsElsewhere(context.Background())
	closed, err := envs[1].v.r.CloseConnectionOn(context.Background(), 1, "a -> b", "x")
	if len(cs) != 0 || len(ks) != 0 || len(ts) != 0 || len(unanswered) != 0 || closed || err != nil {
		t.Fatalf("node 1 without a front end: connections %v, consumers %v, totals %v, unanswered %v, close %v %v",
			cs, ks, ts, unanswered, closed, err)
	}
}
