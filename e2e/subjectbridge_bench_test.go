package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/wharf-mq/wharf/internal/node"
	"github.com/wharf-mq/wharf/internal/nodetest"
)

// BenchmarkSubjectBridge (go test -run '^$' -bench SubjectBridge ./e2e/)
// measures 16-byte messages through one node, clients in this process:
//
//   - nats/bindings=0 and nats/bindings=100: NATS pub/sub from one
//     nats.go publisher to one subscriber, without and with 100 amq.topic
//     bindings on other subjects: what the bridge costs a NATS publish it
//     has no interest in (it should be nothing).
//   - nats-to-amqp: a nats.go publisher into an AMQP queue bound to
//     amq.topic, drained by one amqp091-go consumer (no-ack).
//   - amqp-to-nats: an amqp091-go publisher (no confirms) to amq.topic,
//     received by one nats.go subscriber.
func BenchmarkSubjectBridge(b *testing.B) {
	body := make([]byte, 16)
	for _, bindings := range []int{0, 100} {
		b.Run(fmt.Sprint("nats/bindings=", bindings), func(b *testing.B) {
			n, nc, ch := benchSides(b)
			for i := range bindings {
				if err := ch.QueueBind("elsewhere", fmt.Sprint("other.", i, ".#"), "amq.topic", false, nil); err != nil {
					b.Fatal(err)
				}
			}
			publishFlatOut(b, nc, body, benchNATSSubscriber(b, n, b.N))
		})
	}
	b.Run("nats-to-amqp", func(b *testing.B) {
		_, nc, ch := benchSides(b)
		if err := ch.QueueBind("elsewhere", "bench.#", "amq.topic", false, nil); err != nil {
			b.Fatal(err)
		}
		ds, err := ch.Consume("elsewhere", "", true, false, false, false, nil)
		if err != nil {
			b.Fatal(err)
		}
		received := make(chan struct{})
		go func() {
			count := 0
			for range ds {
				if count++; count == b.N {
					close(received)
				}
			}
		}()
		publishFlatOut(b, nc, body, received)
	})
	b.Run("amqp-to-nats", func(b *testing.B) {
		n, _, ch := benchSides(b)
		received := benchNATSSubscriber(b, n, b.N)
		ctx := context.Background()
		b.ResetTimer()
		for range b.N {
			if err := ch.PublishWithContext(ctx, "amq.topic", "bench.x", false, false, amqp091.Publishing{Body: body}); err != nil {
				b.Fatal(err)
			}
		}
		waitReceived(b, received)
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	})
}

// benchSides starts a node with NATS and returns a NATS connection and an
// AMQP channel to it, with the queue "elsewhere" declared.
func benchSides(b *testing.B) (*node.Node, *nats.Conn, *amqp091.Channel) {
	n := nodetest.Start(b, nodetest.WithConfig(func(c *node.Config) { c.NATSAddr = "127.0.0.1:0" }))
	nc, err := nats.Connect("nats://" + n.NATSAddr())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	conn, err := amqp091.Dial(nodetest.AMQPURL(n))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := ch.QueueDeclare("elsewhere", false, false, false, false, nil); err != nil {
		b.Fatal(err)
	}
	return n, nc, ch
}

// benchNATSSubscriber subscribes to bench.> on a connection of its own; the
// channel closes once want messages have come.
func benchNATSSubscriber(b *testing.B, n *node.Node, want int) <-chan struct{} {
	sc, err := nats.Connect("nats://" + n.NATSAddr())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(sc.Close)
	received := make(chan struct{})
	count := 0
	sub, err := sc.Subscribe("bench.>", func(*nats.Msg) {
		if count++; count == want {
			close(received)
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	sub.SetPendingLimits(-1, -1)
	sc.Flush()
	return received
}

// publishFlatOut publishes b.N messages to bench.x as fast as nc takes
// them and reports messages per second once received closes.
func publishFlatOut(b *testing.B, nc *nats.Conn, body []byte, received <-chan struct{}) {
	b.ResetTimer()
	for range b.N {
		nc.Publish("bench.x", body)
	}
	nc.Flush()
	waitReceived(b, received)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

func waitReceived(b *testing.B, received <-chan struct{}) {
	select {
	case <-received:
	case <-time.After(time.Minute):
		b.Fatal("not everything arrived within a minute")
	}
}
