package cluster

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// listedConsumer is what /api/consumers and a queue's consumer_details
// show of a consumer.
type listedConsumer struct {
	Tag         string `json:"consumer_tag"`
	AckRequired bool   `json:"ack_required"`
	Prefetch    int    `json:"prefetch_count"`
	Active      bool   `json:"active"`
	Queue       struct {
		Name  string `json:"name"`
		VHost string `json:"vhost"`
	} `json:"queue"`
	Channel struct {
		Name       string `json:"name"`
		Connection string `json:"connection_name"`
		Node       string `json:"node"`
		PeerHost   string `json:"peer_host"`
		PeerPort   int    `json:"peer_port"`
	} `json:"channel_details"`
}

func (k listedConsumer) String() string {
	return fmt.Sprintf("%s/%s %s ack %v prefetch %d active %v on %s from %s:%d (%s)", k.Queue.VHost, k.Queue.Name,
		k.Tag, k.AckRequired, k.Prefetch, k.Active, k.Channel.Node, k.Channel.PeerHost, k.Channel.PeerPort, k.Channel.Name)
}

// getConsumers decodes GET path's answer on the node's management API
// into out, and returns the nodes its Wharf-Unanswered-Nodes header names.
func (a apiNode) getConsumers(ctx context.Context, path string, out any) (string, error) {
	h, err := a.getAPIHeader(ctx, path, out)
	return h.Get("Wharf-Unanswered-Nodes"), err
}

// consumerShown is how a consumer of the queue "orders" on node id,
// whose client's connection is conn, should be listed.
func consumerShown(id int, conn *amqp.Connection, tag string, ack bool, prefetch int) string {
	addr := conn.LocalAddr().(*net.TCPAddr)
	k := listedConsumer{Tag: tag, AckRequired: ack, Prefetch: prefetch, Active: true}
	k.Queue.Name, k.Queue.VHost = "orders", "/"
	k.Channel.Node, k.Channel.PeerHost, k.Channel.PeerPort = wharfName(id), addr.IP.String(), addr.Port
	k.Channel.Name = fmt.Sprintf("%s -> %s (1)", addr, conn.RemoteAddr())
	return k.String()
}

// TestConsumersOnEveryNode: three `wharf serve` processes. A classic
// queue declared on node 1 has an amqp091-go consumer on node 1 and one
// on node 2. Node 3, which has neither, lists both in the queue's
// consumer_details and in /api/consumers (and /api/consumers/%2F), each
// with its node, channel, connection's peer address, tag, ack mode and
// prefetch, as RabbitMQ's management API does on any node; node 1 lists
// its own client's beside node 2's. Node 2 killed -9: node 3 lists node
// 1's consumer alone, names wharf@2 in Wharf-Unanswered-Nodes, and
// answers within about a second.
func TestConsumersOnEveryNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	nodes := startAPICluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()

	c1, c2 := dialAMQP(t, nodes[0].amqp), dialAMQP(t, nodes[1].amqp)
	ch1, ch2 := channel(t, c1), channel(t, c2)
	if _, err := ch1.QueueDeclare("orders", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch1.Qos(7, 0, false); err != nil {
		t.Fatal(err)
	}
	if _, err := ch1.Consume("orders", "on-node-1", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch2.Qos(9, 0, false); err != nil {
		t.Fatal(err)
	}
	if _, err := ch2.Consume("orders", "on-node-2", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	want := []string{
		consumerShown(1, c1, "on-node-1", true, 7),
		consumerShown(2, c2, "on-node-2", false, 9),
	}

	shown := func(a apiNode, path string, details bool) ([]string, string, error) {
		var ks []listedConsumer
		var unanswered string
		var err error
		if details {
			var q struct {
				Consumers []listedConsumer `json:"consumer_details"`
			}
			unanswered, err = a.getConsumers(ctx, path, &q)
			ks = q.Consumers
		} else {
			unanswered, err = a.getConsumers(ctx, path, &ks)
		}
		out := make([]string, len(ks))
		for i, k := range ks {
			out[i] = k.String()
		}
		return out, unanswered, err
	}
	for _, path := range []string{"/api/queues/%2F/orders", "/api/consumers", "/api/consumers/%2F"} {
		got, unanswered, err := shown(nodes[2], path, strings.HasPrefix(path, "/api/queues"))
		if err != nil || !slices.Equal(got, want) || unanswered != "" {
			t.Fatalf("node 3's %s lists %q (unanswered %q), %v; want %q", path, got, unanswered, err, want)
		}
	}
	// Node 1 lists its own client's consumer beside node 2's.
	if got, unanswered, err := shown(nodes[0], "/api/consumers", false); err != nil || !slices.Equal(got, want) || unanswered != "" {
		t.Fatalf("node 1's /api/consumers lists %q (unanswered %q), %v; want %q", got, unanswered, err, want)
	}

	nodes[1].kill()
	killed := time.Now()
	for {
		start := time.Now()
		got, unanswered, err := shown(nodes[2], "/api/consumers", false)
		if took := time.Since(start); took > 1500*time.Millisecond {
			t.Fatalf("/api/consumers on node 3 took %v with node 2 dead", took)
		}
		if err != nil {
			t.Fatal(err)
		}
		if unanswered != "" {
			if !slices.Equal(got, want[:1]) || unanswered != wharfName(2) {
				t.Fatalf("with node 2 dead node 3 lists %q, unanswered %q; want %q, wharf@2", got, unanswered, want[:1])
			}
			t.Logf("node 3 names node 2 unanswered %v after its kill", time.Since(killed))
			break
		}
		if !slices.Equal(got, want) && !slices.Equal(got, want[:1]) { // node 2's client is gone with it
			t.Fatalf("node 3 lists %q while node 2 dies", got)
		}
		if ctx.Err() != nil {
			t.Fatal("node 3 never named node 2 unanswered")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
