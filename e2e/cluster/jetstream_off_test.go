package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
)

// jetstreamOffLine is what a cluster node logs once at start.
const jetstreamOffLine = "JetStream is off: it does not run in a cluster yet"

// TestJetStreamOffInCluster: JetStream does not run across nodes yet, so
// every node of a cluster answers as nats-server with JetStream disabled
// (before, each node ran a JetStream of its own over the replicated
// topics: a stream made on node 1 was unknown to the others, and a
// publish was accepted only on node 1, while it led the stream's
// partition). nats.go gets "jetstream not enabled", no responders and
// "no response from stream" on every node, INFO leaves "jetstream" out,
// the node says so once in its log, and Core NATS and the subject bridge
// to amq.topic work.
func TestJetStreamOffInCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three wharf processes")
	}
	nodes, amqpAddrs := prepareAMQPCluster(t, 3)
	natsAddrs := make([]string, len(nodes))
	for i, nd := range nodes {
		natsAddrs[i] = freeAddr(t)
		nd.extraArgs = append(nd.extraArgs, "--nats-addr", natsAddrs[i])
	}
	startAll(nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()

	conns := make([]*nats.Conn, len(nodes))
	for i, addr := range natsAddrs {
		conns[i] = dialNATS(t, ctx, addr)
		if js, ok := natsInfo(t, addr)["jetstream"]; ok {
			t.Errorf("node %d: INFO has \"jetstream\": %v; want it left out", i+1, js)
		}
		js, err := jetstream.New(conns[i])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.AccountInfo(ctx); !errors.Is(err, jetstream.ErrJetStreamNotEnabled) {
			t.Errorf("node %d: AccountInfo: %v; want %v", i+1, err, jetstream.ErrJetStreamNotEnabled)
		}
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}}); !errors.Is(err, nats.ErrNoResponders) {
			t.Errorf("node %d: CreateStream: %v; want %v", i+1, err, nats.ErrNoResponders)
		}
		if _, err := js.Publish(ctx, "orders.new", []byte("x")); !errors.Is(err, jetstream.ErrNoStreamResponse) {
			t.Errorf("node %d: Publish: %v; want %v", i+1, err, jetstream.ErrNoStreamResponse)
		}
		legacy, err := conns[i].JetStream()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := legacy.AccountInfo(nats.Context(ctx)); !errors.Is(err, nats.ErrJetStreamNotEnabled) {
			t.Errorf("node %d: legacy AccountInfo: %v; want %v", i+1, err, nats.ErrJetStreamNotEnabled)
		}
	}

	// Core NATS on each node: a request answered by a responder on the
	// same node.
	for i, nc := range conns {
		subject := fmt.Sprintf("svc.%d", i+1)
		sub, err := nc.Subscribe(subject, func(m *nats.Msg) { m.Respond(append([]byte("re: "), m.Data...)) })
		if err != nil {
			t.Fatal(err)
		}
		reply, err := nc.RequestWithContext(ctx, subject, []byte("ping"))
		if err != nil || string(reply.Data) != "re: ping" {
			t.Errorf("node %d: request: %v %q", i+1, err, replyData(reply))
		}
		sub.Unsubscribe()
	}

	// The subject bridge: a NATS publish on node 3 reaches a queue bound
	// to amq.topic, declared and consumed on node 2; an AMQP publish to
	// amq.topic on node 2 reaches a NATS subscriber there.
	ch := channel(t, dialAMQP(t, amqpAddrs[1]))
	if _, err := ch.QueueDeclare("bridged", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind("bridged", "bridge.#", "amq.topic", false, nil); err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch.Consume("bridged", "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Node 3 hears of the binding as it applies it, and a NATS message
	// nobody has interest in is dropped: publish until one arrives.
	for got := false; !got; {
		if err := conns[2].Publish("bridge.orders", []byte("from NATS")); err != nil {
			t.Fatal(err)
		}
		select {
		case d := <-deliveries:
			if string(d.Body) != "from NATS" || d.RoutingKey != "bridge.orders" {
				t.Fatalf("AMQP got %q with routing key %q", d.Body, d.RoutingKey)
			}
			got = true
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			t.Fatal("a NATS publish on node 3 did not reach the queue on node 2")
		}
	}
	sub, err := conns[1].SubscribeSync("back.orders")
	if err != nil {
		t.Fatal(err)
	}
	if err := conns[1].Flush(); err != nil {
		t.Fatal(err)
	}
	if err := ch.PublishWithContext(ctx, "amq.topic", "back.orders", false, false, amqp.Publishing{Body: []byte("from AMQP")}); err != nil {
		t.Fatal(err)
	}
	if m, err := sub.NextMsgWithContext(ctx); err != nil || string(m.Data) != "from AMQP" {
		t.Errorf("NATS subscriber on node 2: %v %q", err, replyData(m))
	}

	for _, nd := range nodes {
		b, err := os.ReadFile(nd.logPath)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(b), jetstreamOffLine); n != 1 {
			t.Errorf("node %d logged %q %d times; want once", nd.id, jetstreamOffLine, n)
		}
	}
}

// dialNATS connects nats.go to addr, retrying while the node starts (its
// NATS port opens after its Kafka port).
func dialNATS(t *testing.T, ctx context.Context, addr string) *nats.Conn {
	t.Helper()
	for {
		nc, err := nats.Connect("nats://" + addr)
		if err == nil {
			t.Cleanup(nc.Close)
			return nc
		}
		select {
		case <-ctx.Done():
			t.Fatalf("connect to NATS at %s: %v", addr, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// natsInfo returns the fields of the INFO a NATS server sends first.
func natsInfo(t *testing.T, addr string) map[string]any {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	js, ok := strings.CutPrefix(strings.TrimSpace(line), "INFO ")
	if !ok {
		t.Fatalf("first line %q is not INFO", line)
	}
	var info map[string]any
	if err := json.Unmarshal([]byte(js), &info); err != nil {
		t.Fatal(err)
	}
	return info
}

// replyData is m's payload, or nothing without m.
func replyData(m *nats.Msg) []byte {
	if m == nil {
		return nil
	}
	return m.Data
}

// TestSingleNodeStreamsStayOutOfCluster: a single node's data directory
// holding a stream, started as a cluster node (here a new cluster of
// itself), is refused, its metadata log not being the cluster's; started
// again as a single node, it serves the stream with every message.
func TestSingleNodeStreamsStayOutOfCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts wharf processes")
	}
	nd := prepareCluster(t, 1)[0]
	natsAddr := freeAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()

	stop := serveSingle(t, nd, natsAddr)
	js, err := jetstream.New(dialNATS(t, ctx, natsAddr))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := js.Publish(ctx, "orders.new", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	stop()

	nd.start()
	select {
	case <-nd.exited:
	case <-ctx.Done():
		t.Fatalf("the single node's directory served as a cluster node:\n%s", nd.logTail())
	}
	if log := nd.logTail(); !strings.Contains(log, "is missing or empty, but") {
		t.Fatalf("refused for another reason:\n%s", log)
	}

	serveSingle(t, nd, natsAddr)
	js, err = jetstream.New(dialNATS(t, ctx, natsAddr))
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := s.Info(ctx); err != nil || info.State.Msgs != 3 {
		t.Fatalf("stream after the refusal: %v %+v; want 3 messages", err, info)
	}
}

// serveSingle runs `wharf serve` on nd's data directory as a single node
// with a NATS listener on natsAddr; stop ends it with SIGTERM and waits.
func serveSingle(t *testing.T, nd *node, natsAddr string) (stop func()) {
	t.Helper()
	logFile, err := os.OpenFile(nd.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(nd.bin, "serve", "--data-dir", nd.dataDir, "--kafka-addr", nd.kafkaAddr,
		"--amqp-addr=", "--http-addr=", "--nats-addr", natsAddr)
	cmd.Env = withoutWharfEnv()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	dieWithTest(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	return func() {
		cmd.Process.Signal(syscall.SIGTERM)
		<-exited
	}
}
