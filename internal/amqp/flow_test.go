package amqp

import (
	"bytes"
	"net"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

func waitBlocking(t *testing.T, notify <-chan amqp091.Blocking, active bool) amqp091.Blocking {
	t.Helper()
	select {
	case b := <-notify:
		if b.Active != active {
			t.Fatalf("got %+v, want active=%v", b, active)
		}
		return b
	case <-time.After(testTimeout):
		t.Fatalf("no connection.blocked/unblocked (active=%v)", active)
	}
	return amqp091.Blocking{}
}

// TestMemoryAlarmBlocksPublishers: past the high-water mark a publishing
// connection hears connection.blocked and its publishes wait; a connection
// that never published is not told; consuming drains memory, and then
// connection.unblocked arrives and the held publish goes through.
func TestMemoryAlarmBlocksPublishers(t *testing.T) {
	b := startBroker(t, func(c *Config) { c.MemoryHighWatermark = 10_000 })
	pubConn := b.dial()
	pubBlocked := pubConn.NotifyBlocked(make(chan amqp091.Blocking, 2))
	bystander := b.dial()
	bystanderBlocked := bystander.NotifyBlocked(make(chan amqp091.Blocking, 2))
	openChannel(t, bystander)

	pubCh := openChannel(t, pubConn)
	declareQueue(t, pubCh, "mem", false)
	big := bytes.Repeat([]byte("x"), 20_000)
	if err := pubCh.PublishWithContext(t.Context(), "", "mem", false, false, amqp091.Publishing{Body: big}); err != nil {
		t.Fatal(err)
	}
	if got := waitBlocking(t, pubBlocked, true); got.Reason != "low on memory" {
		t.Errorf("reason %q", got.Reason)
	}
	if err := pubCh.PublishWithContext(t.Context(), "", "mem", false, false, amqp091.Publishing{Body: []byte("held")}); err != nil {
		t.Fatal(err)
	}

	consumer := b.channel()
	d, ok, err := consumer.Get("mem", true)
	if err != nil || !ok || len(d.Body) != len(big) {
		t.Fatalf("get: ok=%v err=%v", ok, err)
	}
	waitBlocking(t, pubBlocked, false)
	waitFor(t, "the held publish", func() bool { return b.queueInfo("mem").Messages == 1 })
	select {
	case n := <-bystanderBlocked:
		t.Errorf("a connection that never published got %+v", n)
	default:
	}
}

// TestDiskAlarmBlocksPublishers: below the free-space limit publishes wait
// until space is back.
func TestDiskAlarmBlocksPublishers(t *testing.T) {
	b := startBroker(t, func(c *Config) {
		c.DataDir = t.TempDir()
		c.DiskFreeLimit = 1 << 62
	})
	waitFor(t, "disk alarm", func() bool { return b.srv.alarms.active.Load() })
	conn := b.dial()
	blocked := conn.NotifyBlocked(make(chan amqp091.Blocking, 2))
	ch := openChannel(t, conn)
	declareQueue(t, ch, "disk", false)
	if err := ch.PublishWithContext(t.Context(), "", "disk", false, false, amqp091.Publishing{Body: []byte("waits")}); err != nil {
		t.Fatal(err)
	}
	if got := waitBlocking(t, blocked, true); got.Reason != "low on disk" {
		t.Errorf("reason %q", got.Reason)
	}
	if n := b.queueInfo("disk").Messages; n != 0 {
		t.Fatalf("%d messages published while blocked", n)
	}
	b.srv.alarms.diskLimit.Store(1)
	waitBlocking(t, blocked, false)
	waitFor(t, "the held publish", func() bool { return b.queueInfo("disk").Messages == 1 })
}

// TestOutboundLimitPausesNoAckConsumer: a no-ack consumer whose socket is
// not read does not make the server buffer the queue: deliveries stop at
// the outbound limit, the rest stays in the queue, and everything arrives
// once the client reads.
func TestOutboundLimitPausesNoAckConsumer(t *testing.T) {
	const limit = 64 << 10
	b := startBroker(t, func(c *Config) { c.OutboundLimit = limit })
	declareQueue(t, b.channel(), "flood", false)

	c := dialRaw(t, b.addr, 0)
	var server *conn
	b.srv.eachConn(func(sc *conn) {
		if sc.nc.RemoteAddr().String() == c.nc.LocalAddr().String() {
			server = sc
		}
	})
	if server == nil {
		t.Fatal("server side of the raw connection not found")
	}
	// Keep the kernel from absorbing much of what the client does not read.
	server.nc.(*net.TCPConn).SetWriteBuffer(4096)
	c.openChannel(1)
	c.send(1, &amqpwire.BasicConsume{Queue: "flood", ConsumerTag: "c", NoAck: true})
	c.expect(1, amqpwire.BasicConsumeOKID)

	const n, size = 200, 16 << 10
	pub := b.channel()
	if err := pub.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := pub.NotifyPublish(make(chan amqp091.Confirmation, n))
	payload := bytes.Repeat([]byte("y"), size)
	for range n {
		if err := pub.PublishWithContext(t.Context(), "", "flood", false, false, amqp091.Publishing{Body: payload}); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		<-confirms
	}
	held := func() int64 {
		server.out.mu.Lock()
		defer server.out.mu.Unlock()
		return server.out.held
	}
	if h := held(); h > limit+size+1024 {
		t.Errorf("writer holds %d bytes, over the %d limit", h, limit)
	}
	if ready := b.queueInfo("flood").Messages; ready == 0 {
		t.Errorf("every message left the queue for a client that reads nothing")
	} else {
		t.Logf("%d of %d messages still in the queue, %d bytes in the writer", ready, n, held())
	}

	c.nc.SetDeadline(time.Now().Add(testTimeout))
	got := 0
	for got < n {
		f, err := c.fr.ReadFrame()
		if err != nil {
			t.Fatalf("after %d of %d deliveries: %v", got, n, err)
		}
		if f.Type == amqpwire.FrameMethod {
			if id, _ := amqpwire.PeekMethodID(f.Payload); id == amqpwire.BasicDeliverID {
				got++
			}
		}
	}
	if ready := b.queueInfo("flood").Messages; ready != 0 {
		t.Errorf("%d messages left after the client read everything", ready)
	}
}

// TestShutdownWithBlockedPublisher: a publisher held by an alarm does not
// hold up Shutdown, and hears connection.close 320.
func TestShutdownWithBlockedPublisher(t *testing.T) {
	b := startBroker(t, func(c *Config) {
		c.DataDir = t.TempDir()
		c.DiskFreeLimit = 1 << 62
	})
	waitFor(t, "disk alarm", func() bool { return b.srv.alarms.active.Load() })
	conn := b.dial()
	blocked := conn.NotifyBlocked(make(chan amqp091.Blocking, 1))
	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	ch := openChannel(t, conn)
	if err := ch.PublishWithContext(t.Context(), "", "q", false, false, amqp091.Publishing{}); err != nil {
		t.Fatal(err)
	}
	waitBlocking(t, blocked, true)
	start := time.Now()
	b.stop()
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Shutdown took %v with a blocked publisher", d)
	}
	if e := closeError(t, closed); e.Code != amqp091.ConnectionForced {
		t.Errorf("close %v, want 320", e)
	}
}
