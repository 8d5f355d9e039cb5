package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/wharf-mq/wharf/internal/node"
	"github.com/wharf-mq/wharf/internal/nodetest"
)

// startNATSNode starts a node with its NATS listener on a free port, with
// the NATS settings cfg sets.
func startNATSNode(t *testing.T, cfg func(*node.Config)) *node.Node {
	t.Helper()
	return startNode(t, nodetest.WithConfig(func(c *node.Config) {
		c.NATSAddr = "127.0.0.1:0"
		if cfg != nil {
			cfg(c)
		}
	}))
}

// TestNATSThroughNode drives a node's NATS listener with nats.go: a queue
// group behind a request-reply service, authenticated by token.
func TestNATSThroughNode(t *testing.T) {
	n := startNATSNode(t, func(c *node.Config) { c.NATS.Token = "e2e-token" })
	url := "nats://" + n.NATSAddr()
	if _, err := nats.Connect(url, nats.Token("wrong")); err == nil {
		t.Fatal("connected with a wrong token")
	}
	for range 2 {
		worker, err := nats.Connect(url, nats.Token("e2e-token"))
		if err != nil {
			t.Fatal(err)
		}
		defer worker.Close()
		worker.QueueSubscribe("orders.*.price", "pricers", func(m *nats.Msg) {
			m.Respond([]byte("42:" + m.Subject))
		})
		worker.Flush()
	}
	client, err := nats.Connect(url, nats.Token("e2e-token"))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	reply, err := client.Request("orders.eu.price", nil, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if string(reply.Data) != "42:orders.eu.price" {
		t.Fatalf("reply %q", reply.Data)
	}
	if _, err := client.Request("orders.eu.stock", nil, testTimeout); err != nats.ErrNoResponders {
		t.Fatalf("request nobody serves: %v, want no responders", err)
	}
}

// TestNATSNodeCloseDisconnectsClients checks that closing the node ends
// its NATS connections (nats.go sees the disconnect) rather than waiting
// for them.
func TestNATSNodeCloseDisconnectsClients(t *testing.T) {
	n := startNATSNode(t, nil)
	disconnected := make(chan struct{})
	nc, err := nats.Connect("nats://"+n.NATSAddr(), nats.NoReconnect(),
		nats.DisconnectErrHandler(func(*nats.Conn, error) { close(disconnected) }))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.SubscribeSync("idle"); err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-disconnected:
	case <-time.After(testTimeout):
		t.Fatal("client not disconnected by Close")
	}
}
