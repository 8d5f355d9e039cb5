package amqp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/wharf-mq/wharf/internal/access"
	"github.com/wharf-mq/wharf/internal/kvtest"
	"github.com/wharf-mq/wharf/internal/mq"
	"github.com/wharf-mq/wharf/internal/users"
)

// countedDefs is a node's view of the metadata log that counts its
// barriers: a lookup that hits must run none. While cut (not nil), a
// barrier waits until it is closed, as one does on a node cut off from
// the metadata quorum.
type countedDefs struct {
	*kvtest.Node
	barriers atomic.Int64
	cut      atomic.Pointer[chan struct{}]
}

func (d *countedDefs) Barrier() error { return d.BarrierContext(context.Background()) }

// BarrierContext is Barrier for the users' and permissions' stores,
// which stop waiting when ctx ends.
func (d *countedDefs) BarrierContext(ctx context.Context) error {
	d.barriers.Add(1)
	if cut := d.cut.Load(); cut != nil {
		select {
		case <-*cut:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return d.Node.Barrier()
}

// cutOff holds d's barriers until the test ends.
func (d *countedDefs) cutOff(t *testing.T) {
	healed := make(chan struct{})
	d.cut.Store(&healed)
	t.Cleanup(func() { close(healed) }) // before laggingCluster's: the nodes close then
}

// clusterNode is one node of laggingCluster: an AMQP server over its
// registry, its users and its permissions, all three following the
// node's view of the metadata log.
type clusterNode struct {
	defs   *countedDefs
	reg    *mq.Registry
	users  *users.Store
	access *access.Store
	addr   string
}

// vhost returns the node's vhost of that name.
func (n *clusterNode) vhost(t *testing.T, name string) *mq.VHost {
	t.Helper()
	v, err := n.reg.VHost(name)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// addApp makes user app (password "pw") through n, with every
// permission in vhosts.
func (n *clusterNode) addApp(t *testing.T, vhosts ...string) {
	t.Helper()
	if err := n.users.Put("app", "pw", nil); err != nil {
		t.Fatal(err)
	}
	for _, vhost := range vhosts {
		if err := n.access.GrantAll("app", vhost); err != nil {
			t.Fatal(err)
		}
	}
}

// dialAs connects as user (password "pw") to vhost.
func (n *clusterNode) dialAs(t *testing.T, user, vhost string) (*amqp091.Connection, error) {
	t.Helper()
	conn, err := amqp091.DialConfig(fmt.Sprintf("amqp://%s:pw@%s/%s", user, n.addr, vhost), amqp091.Config{Dial: amqp091.DefaultDial(testTimeout)})
	if err == nil {
		t.Cleanup(func() { conn.Close() })
	}
	return conn, err
}

// laggingCluster starts nodes 1 and 2 of a cluster over one metadata log
// (kvtest.Mem): what either writes is live at once, and the writer
// applies it before its write returns, but the other node applies it
// only when it catches up (a barrier, or a write of its own), as a node
// that lags does. What node 1 makes is thus never on node 2 before node
// 2 looks for it and misses. Users and permissions follow the same log,
// so the vhost, user and permission made on node 1 reach node 2 together.
func laggingCluster(t *testing.T) [2]*clusterNode {
	t.Helper()
	return laggingClusterWith(t, Config{})
}

// laggingClusterWith is laggingCluster with cfg's settings (but its
// logger, users and permissions) on both AMQP servers.
func laggingClusterWith(t *testing.T, cfg Config) [2]*clusterNode {
	t.Helper()
	log := kvtest.New()
	var (
		mu       sync.Mutex
		handlers = map[int32]func(context.Context, int32, []byte) ([]byte, error){}
	)
	var nodes [2]*clusterNode
	var stops []func()
	t.Cleanup(func() {
		for _, stop := range stops {
			stop()
		}
		checkNoServerGoroutines(t)
	})
	logs := &testLogWriter{t: t}
	t.Cleanup(logs.stop)
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	for i := range nodes {
		id := int32(i + 1)
		defs := &countedDefs{Node: log.Node()}
		cc := &mq.ClusterConfig{
			NodeID:  id,
			Watch:   func(fn func(string)) { defs.Watch("mq/", fn) },
			Get:     defs.Get,
			PutIf:   defs.PutIf,
			Barrier: defs.Barrier,
			Nodes:   func() []int32 { return []int32{1, 2} },
			PeerUp:  func(int32) bool { return true },
			CallNode: func(ctx context.Context, to int32, data []byte) ([]byte, error) {
				mu.Lock()
				h := handlers[to]
				mu.Unlock()
				return h(ctx, id, data)
			},
			HandleCalls: func(fn func(context.Context, int32, []byte) ([]byte, error)) {
				mu.Lock()
				handlers[id] = fn
				mu.Unlock()
			},
		}
		reg, err := mq.Open(mq.Config{DataDir: t.TempDir(), Definitions: defs, Cluster: cc, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		n := &clusterNode{defs: defs, reg: reg}
		if n.users, err = users.Open(defs); err != nil {
			t.Fatal(err)
		}
		if n.access, err = access.Open(defs); err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		cfg.Logger, cfg.Users, cfg.Access = logger, n.users, n.access
		srv, done := NewServer(reg, cfg), make(chan error, 1)
		go func() { done <- srv.Serve(ln) }()
		n.addr = ln.Addr().String()
		stops = append(stops, func() {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			if err := srv.Shutdown(ctx); err != nil {
				t.Errorf("node %d: shutdown: %v", id, err)
			}
			if err := <-done; err != nil {
				t.Errorf("node %d: serve: %v", id, err)
			}
			if err := reg.Close(); err != nil {
				t.Errorf("node %d: close registry: %v", id, err)
			}
		})
		nodes[i] = n
	}
	return nodes
}

// TestLaggingNodeOpensVHost: a client connects through node 2 to a vhost
// made, with its user and the user's permission, through node 1 just
// now, which node 2 had not applied (it catches up on the miss), as any
// node of RabbitMQ's cluster lets it; a permission given on node 1 just
// now in a vhost node 2 has lets the client in too; a vhost that exists
// nowhere is still 530; and a connection.open that finds its vhost and
// permission runs no barrier.
func TestLaggingNodeOpensVHost(t *testing.T) {
	nodes := laggingCluster(t)
	node1, node2 := nodes[0], nodes[1]
	node1.addApp(t)
	if _, err := node1.reg.AddVHost("granted"); err != nil {
		t.Fatal(err)
	}
	if !node2.reg.CatchUp() { // node 2 knows the user and the vhost: only what follows is new to it
		t.Fatal("node 2 did not catch up")
	}

	if _, err := node1.reg.AddVHost("fresh"); err != nil {
		t.Fatal(err)
	}
	if err := node1.access.GrantAll("app", "fresh"); err != nil {
		t.Fatal(err)
	}
	if _, err := node2.reg.VHost("fresh"); err == nil {
		t.Fatal("node 2 applied the vhost before it was asked for it")
	}
	if _, err := node2.dialAs(t, "app", "fresh"); err != nil {
		t.Fatalf("connection.open to vhost fresh through node 2 right after node 1 made it: %v", err)
	}

	if err := node1.access.GrantAll("app", "granted"); err != nil {
		t.Fatal(err)
	}
	if !node2.defs.Lags() {
		t.Fatal("node 2 applied the permission before it was asked for it")
	}
	if _, err := node2.dialAs(t, "app", "granted"); err != nil {
		t.Fatalf("connection.open to vhost granted through node 2 right after node 1 gave the permission: %v", err)
	}

	_, err := node2.dialAs(t, "app", "nowhere")
	if e := wantCode(t, err, amqp091.NotAllowed); e.Reason != "NOT_ALLOWED - access to vhost 'nowhere' refused for user 'app'" {
		t.Errorf("connection.open to a vhost that exists nowhere: %q", e.Reason)
	}

	before := node2.defs.barriers.Load()
	for _, vhost := range []string{"fresh", "granted"} {
		if _, err := node2.dialAs(t, "app", vhost); err != nil {
			t.Fatalf("connection.open to %q through node 2 again: %v", vhost, err)
		}
	}
	if n := node2.defs.barriers.Load() - before; n != 0 {
		t.Errorf("connections to vhosts node 2 has ran %d barriers, want none", n)
	}
}

// TestCutOffNodeRefusesWithinHandshakeTimeout: a handshake through a
// node cut off from the metadata quorum that looks up what the node
// does not have (a vhost, a user, a permission) is refused once the
// handshake timeout runs out, as RabbitMQ bounds a handshake, not when
// the catch-up gives up (30 s): past the client's own timeout, where
// amqp091-go gives up with an error of its own (its guess: 403 "no
// access to this vhost" at connection.open, 403 "username or password
// not allowed" at the login, the same it reports for the broker's
// refusal there, so only the time tells them apart), not the broker's
// refusal.
func TestCutOffNodeRefusesWithinHandshakeTimeout(t *testing.T) {
	const handshake = time.Second
	nodes := laggingClusterWith(t, Config{HandshakeTimeout: handshake})
	node1, node2 := nodes[0], nodes[1]
	node1.addApp(t, "/")
	if err := node1.users.Put("bare", "pw", nil); err != nil { // no permission anywhere
		t.Fatal(err)
	}
	if !node2.reg.CatchUp() { // node 2 knows both users: only what each case names is missed
		t.Fatal("node 2 did not catch up")
	}
	node2.defs.cutOff(t)

	for _, c := range []struct {
		what, user, vhost string
		code              int
	}{
		{"a vhost the node does not have", "app", "nowhere", amqp091.NotAllowed},
		// amqp091-go does not announce authentication_failure_close:
		// the broker refuses a login by closing the socket, which it
		// reports as ErrCredentials (403).
		{"a user the node does not have", "nobody", "/", amqp091.AccessRefused},
		{"a permission the node does not have", "bare", "/", amqp091.NotAllowed},
	} {
		start := time.Now()
		_, err := node2.dialAs(t, c.user, c.vhost)
		took := time.Since(start)
		wantCode(t, err, c.code)
		// The handshake's start, login and tune-ok take some of the
		// timeout too; a loaded machine gets room, but far less than
		// the catch-up's own bound.
		if took > handshake+2*time.Second {
			t.Errorf("a handshake through a cut-off node naming %s was refused after %v, want about the handshake timeout (%v)",
				c.what, took, handshake)
		}
	}
}

// TestLaggingNodeFindsByName: what a client names through node 2 right
// after node 1 made it, which node 2 had not applied, is found (a
// passive declare of a queue or exchange, a bind to an exchange, a
// consume from a queue) and deleted (an exchange, a binding), as on any
// node of RabbitMQ's cluster; a queue that exists nowhere is still 404.
func TestLaggingNodeFindsByName(t *testing.T) {
	nodes := laggingCluster(t)
	node1, node2 := nodes[0], nodes[1]
	node1.addApp(t, mq.DefaultVHost)
	conn, err := node2.dialAs(t, "app", "")
	if err != nil {
		t.Fatal(err)
	}
	v1 := node1.vhost(t, mq.DefaultVHost)
	declareExchange := func(name string) error {
		return v1.DeclareExchange(mq.ExchangeDef{Name: name, Type: "topic", Durable: true}, false)
	}
	declareQueue := func(name string) error {
		_, err := v1.DeclareQueue(mq.QueueDef{Name: name, Durable: true}, false)
		return err
	}
	bound := func(queue string) bool {
		return slices.ContainsFunc(v1.Bindings(), func(b mq.BindingInfo) bool { return b.Destination == queue })
	}
	for _, c := range []struct {
		what  string
		make  func() error                    // on node 1; node 2 lags behind what it writes last
		op    func(ch *amqp091.Channel) error // on node 2, at once
		check func() error                    // on node 1, caught up after op
	}{
		{"exchange.declare passive", func() error { return declareExchange("orders") },
			func(ch *amqp091.Channel) error {
				return ch.ExchangeDeclarePassive("orders", "topic", true, false, false, false, nil)
			}, nil},
		{"queue.declare passive", func() error { return declareQueue("billing") },
			func(ch *amqp091.Channel) error {
				_, err := ch.QueueDeclarePassive("billing", true, false, false, false, nil)
				return err
			}, nil},
		{"queue.bind to an exchange", func() error { return declareExchange("audit") },
			func(ch *amqp091.Channel) error {
				q, err := ch.QueueDeclare("", false, true, true, false, nil)
				if err != nil {
					return err
				}
				return ch.QueueBind(q.Name, "#", "audit", false, nil)
			}, nil},
		{"basic.consume", func() error { return declareQueue("ledger") },
			func(ch *amqp091.Channel) error {
				_, err := ch.Consume("ledger", "", true, false, false, false, nil)
				return err
			}, nil},
		{"exchange.delete", func() error { return declareExchange("doomed") },
			func(ch *amqp091.Channel) error { return ch.ExchangeDelete("doomed", false, false) },
			func() error {
				if v1.HasExchange("doomed") {
					return errors.New("the exchange is still there")
				}
				return nil
			}},
		{"queue.unbind", func() error {
			if err := declareQueue("tally"); err != nil {
				return err
			}
			if !node2.reg.CatchUp() { // node 2 knows both ends, not the binding
				return errors.New("node 2 did not catch up")
			}
			return v1.BindQueue("tally", "amq.topic", "k", nil, 0)
		},
			func(ch *amqp091.Channel) error { return ch.QueueUnbind("tally", "k", "amq.topic", nil) },
			func() error {
				if bound("tally") {
					return errors.New("the binding is still there")
				}
				return nil
			}},
	} {
		if err := c.make(); err != nil {
			t.Fatal(err)
		}
		if !node2.defs.Lags() {
			t.Fatalf("node 2 applied what %s names before it was asked", c.what)
		}
		ch := openChannel(t, conn)
		if err := c.op(ch); err != nil {
			t.Errorf("%s through node 2 right after node 1 made what it names: %v", c.what, err)
		} else if c.check != nil {
			if !node1.reg.CatchUp() { // with node 2's writes
				t.Fatal("node 1 did not catch up")
			}
			if err := c.check(); err != nil {
				t.Errorf("%s through node 2 right after node 1 made what it names: %v", c.what, err)
			}
		}
		ch.Close()
	}
	_, err = openChannel(t, conn).QueueDeclarePassive("nowhere", true, false, false, false, nil)
	wantCode(t, err, amqp091.NotFound)
}

// TestLaggingNodeChecksTopicPermission: a user whose topic permission
// narrows what it may bind from and publish to a topic exchange is held
// to it through node 2 right after node 1 declared the exchange, which
// node 2 had not applied: the check catches up rather than take the
// exchange it does not know for one no topic permission applies to.
// Where node 2 has the exchange, the check runs no barrier.
func TestLaggingNodeChecksTopicPermission(t *testing.T) {
	nodes := laggingCluster(t)
	node1, node2 := nodes[0], nodes[1]
	node1.addApp(t, mq.DefaultVHost)
	for _, exchange := range []string{"ticks", "quotes"} {
		if err := node1.access.SetTopicPermission(access.TopicPermission{User: "app", VHost: mq.DefaultVHost, Exchange: exchange,
			Write: "^public\\.", Read: "^public\\."}); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := node2.dialAs(t, "app", "") // node 2 catches up with the permissions
	if err != nil {
		t.Fatal(err)
	}
	q, err := openChannel(t, conn).QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	v1, v2 := node1.vhost(t, mq.DefaultVHost), node2.vhost(t, mq.DefaultVHost)
	for _, c := range []struct {
		what, exchange, refused string
		op                      func(ch *amqp091.Channel) error
	}{
		{"queue.bind", "ticks", "read access to topic 'private.x' in exchange 'ticks' in vhost '/' refused for user 'app'",
			func(ch *amqp091.Channel) error { return ch.QueueBind(q.Name, "private.x", "ticks", false, nil) }},
		{"basic.publish", "quotes", "write access to topic 'private.x' in exchange 'quotes' in vhost '/' refused for user 'app'",
			func(ch *amqp091.Channel) error {
				return ch.PublishWithContext(t.Context(), "quotes", "private.x", false, false, amqp091.Publishing{Body: body(0)})
			}},
	} {
		if err := v1.DeclareExchange(mq.ExchangeDef{Name: c.exchange, Type: "topic", Durable: true}, false); err != nil {
			t.Fatal(err)
		}
		if v2.HasExchange(c.exchange) {
			t.Fatalf("node 2 applied exchange %s before it was asked", c.exchange)
		}
		t.Run(c.what, func(t *testing.T) { refusedOnChannel(t, conn, c.refused, c.op) })
	}

	before := node2.defs.barriers.Load()
	ch := openChannel(t, conn)
	for _, exchange := range []string{"ticks", "quotes"} { // the publish to quotes routes: one that does not catches up (mq)
		if err := ch.QueueBind(q.Name, "public.#", exchange, false, nil); err != nil {
			t.Fatalf("bind within the topic permission: %v", err)
		}
	}
	if err := ch.PublishWithContext(t.Context(), "quotes", "public.x", false, false, amqp091.Publishing{Body: body(0)}); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclarePassive(q.Name, false, true, true, false, nil); err != nil {
		t.Fatalf("after a publish within the topic permission: %v", err) // the channel stays open
	}
	if n := node2.defs.barriers.Load() - before; n != 0 {
		t.Errorf("checks of exchanges node 2 has ran %d barriers, want none", n)
	}
}
