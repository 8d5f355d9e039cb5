package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// The AMQP fault tests' clients: amqp091-go publishers with confirms and
// consumers with manual acks, each at home on one node, recording into a
// totalQueue. A client whose connection fails (its node killed, stopped
// or cut off, a confirm that does not come) drops it and connects again,
// to its home node first, else to the next node that answers, as an
// application would. They run until stopped, and never fail the test
// themselves: the checker judges what they recorded.

// The test user: guest may only log in from loopback, and the clients of
// the network-namespace tests reach the nodes over a bridge.
const faultUser, faultPassword = "jepsen", "jepsen"

// faultUserArgs create the test user on a node.
var faultUserArgs = []string{"--admin-user", faultUser, "--admin-password", faultPassword}

// confirmTimeout is how long a publisher waits for a confirm before it
// takes its connection for dead: longer than a failover (an election
// timeout, then the new leader's replay).
const confirmTimeout = 5 * time.Second

// clientConn is a client's connection, which it can drop at once
// whatever the broker does: a stopped broker would answer no
// connection.close.
type clientConn struct {
	*amqp.Connection
	raw net.Conn
}

// dialNode connects to the node at addr: 2 s to connect and shake
// hands, heartbeats every second, so that a node stopped or cut off is
// noticed within three.
func dialNode(addr string) (*clientConn, error) {
	var raw net.Conn
	conn, err := amqp.DialConfig(fmt.Sprintf("amqp://%s:%s@%s/", faultUser, faultPassword, addr), amqp.Config{
		Heartbeat: time.Second,
		Dial: func(network, a string) (net.Conn, error) {
			c, err := amqp.DefaultDial(2*time.Second)(network, a)
			raw = c
			return c, err
		},
	})
	if err != nil {
		return nil, err
	}
	return &clientConn{Connection: conn, raw: raw}, nil
}

// drop closes the connection's socket.
func (c *clientConn) drop() { c.raw.Close() }

// openChannel connects to the node at addr and opens a channel; the
// caller drops the connection.
func openChannel(addr string) (*clientConn, *amqp.Channel, error) {
	conn, err := dialNode(addr)
	if err != nil {
		return nil, nil, err
	}
	ch, err := conn.Channel()
	if err != nil {
		conn.drop()
		return nil, nil, err
	}
	return conn, ch, nil
}

// faultClient is what a publisher and a consumer share: a name, the
// nodes' AMQP addresses and the index of its home among them.
type faultClient struct {
	name  string
	addrs []string
	home  int
}

// connect dials the home node, then the others in turn, until one
// answers or ctx ends.
func (c faultClient) connect(ctx context.Context) (*clientConn, error) {
	for attempt := 0; ; attempt++ {
		conn, err := dialNode(c.addrs[(c.home+attempt)%len(c.addrs)])
		if err == nil {
			return conn, nil
		}
		if attempt%len(c.addrs) == len(c.addrs)-1 { // every node refused: wait a little
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
}

// runClients runs each of sessions (a client's work on one connection)
// again and again until ctx ends, each time on a new connection; the
// returned function waits for them to return.
func runClients(ctx context.Context, clients []faultClient, session func(context.Context, faultClient, *clientConn)) (wait func()) {
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				conn, err := c.connect(ctx)
				if err != nil {
					return
				}
				session(ctx, c, conn)
				conn.drop()
			}
		})
	}
	return wg.Wait
}

// publishSession publishes with confirms, round robin over queues, in
// windows of 10, until a confirm fails to come within confirmTimeout,
// the channel fails or ctx ends. A nacked message is indeterminate, as
// are those whose confirm never came.
func publishSession(h *totalQueue, queues []string) func(context.Context, faultClient, *clientConn) {
	const window = 10
	return func(ctx context.Context, c faultClient, conn *clientConn) {
		ch, err := conn.Channel()
		if err != nil {
			return
		}
		if err := ch.Confirm(false); err != nil {
			return
		}
		for n := 0; ctx.Err() == nil; {
			ids := make([]string, 0, window)
			confs := make([]*amqp.DeferredConfirmation, 0, window)
			for range window {
				queue := queues[n%len(queues)]
				n++
				id := h.attempt(c.name, queue)
				conf, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, false, false,
					amqp.Publishing{Body: []byte(id), DeliveryMode: amqp.Persistent})
				if err != nil {
					return
				}
				ids, confs = append(ids, id), append(confs, conf)
			}
			deadline := time.NewTimer(confirmTimeout)
			for i, conf := range confs {
				select {
				case <-conf.Done():
					if conf.Acked() {
						h.confirm(ids[i])
					}
				case <-deadline.C:
					return
				case <-ctx.Done():
					deadline.Stop()
					return
				}
			}
			deadline.Stop()
		}
	}
}

// consumeSession consumes every queue on one channel (prefetch 20 per
// consumer), recording each delivery before it acks it, until the
// connection fails, the broker cancels a consumer or ctx ends.
func consumeSession(h *totalQueue, queues []string) func(context.Context, faultClient, *clientConn) {
	return func(ctx context.Context, c faultClient, conn *clientConn) {
		ch, err := conn.Channel()
		if err != nil {
			return
		}
		if err := ch.Qos(20, 0, false); err != nil {
			return
		}
		var wg sync.WaitGroup
		defer wg.Wait()
		ctx, stop := context.WithCancel(ctx)
		defer stop() // before the wait
		for _, queue := range queues {
			deliveries, err := ch.Consume(queue, "", false, false, false, false, nil)
			if err != nil {
				return
			}
			wg.Go(func() {
				defer stop() // one consumer gone: start again on a new connection
				for {
					select {
					case d, ok := <-deliveries:
						if !ok {
							return
						}
						h.deliver(c.name, queue, d.Body, d.Redelivered, d.Headers["x-delivery-count"])
						d.Ack(false) // lost with the connection: delivered again, a duplicate
					case <-ctx.Done():
						return
					}
				}
			})
		}
		closed := conn.NotifyClose(make(chan *amqp.Error, 1))
		select {
		case <-closed:
		case <-ctx.Done():
		}
		conn.drop() // ends the deliveries of a stopped node too
	}
}

// errNoConfirm: the one message a probe published was not confirmed.
var errNoConfirm = errors.New("not confirmed")

// confirmOne publishes one message of client name to queue on the node
// at addr and waits for its confirm.
func confirmOne(ctx context.Context, h *totalQueue, addr, name, queue string) error {
	conn, ch, err := openChannel(addr)
	if err != nil {
		return err
	}
	defer conn.drop()
	if err := ch.Confirm(false); err != nil {
		return err
	}
	id := h.attempt(name, queue)
	conf, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, false, false,
		amqp.Publishing{Body: []byte(id), DeliveryMode: amqp.Persistent})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, confirmTimeout)
	defer cancel()
	if acked, err := conf.WaitContext(ctx); err != nil {
		return err
	} else if !acked {
		return errNoConfirm
	}
	h.confirm(id)
	return nil
}
