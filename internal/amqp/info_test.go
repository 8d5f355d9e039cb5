package amqp

import (
	"context"
	"strings"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/wharf-mq/wharf/internal/rate"
)

func statValue(stats []rate.Stat, name string) int64 {
	for _, s := range stats {
		if s.Name == name {
			return s.Value
		}
	}
	return -1
}

// TestConnectionsSnapshot: the management API's view of a connection has
// what the client announced (connection_name included), its channels with
// their modes, prefetch and unacknowledged deliveries, its consumers, and
// message counters that add up to the server's totals.
func TestConnectionsSnapshot(t *testing.T) {
	b := startBroker(t)
	props := amqp091.NewConnectionProperties()
	props.SetClientConnectionName("orders-service")
	conn, err := amqp091.DialConfig(b.url(), amqp091.Config{Properties: props, Dial: amqp091.DefaultDial(testTimeout)})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	pub := newConfirmedPublisher(t, openChannel(t, conn))
	declareQueue(t, pub.ch, "work", false)
	for i := range 5 {
		if !pub.publish("", "work", amqp091.Publishing{Body: body(i)}) {
			t.Fatal("nack")
		}
	}
	if !pub.publish("", "nowhere", amqp091.Publishing{Body: body(9)}) { // dropped, still confirmed
		t.Fatal("nack")
	}
	cons := openChannel(t, conn)
	if err := cons.Qos(2, 0, false); err != nil {
		t.Fatal(err)
	}
	if _, err := cons.Consume("work", "c1", false, false, false, false, amqp091.Table{"x-priority": int32(3)}); err != nil {
		t.Fatal(err)
	}
	// Prefetch 2: two deliveries are outstanding once the counters say so.
	var info ConnectionInfo
	waitFor(t, "two deliveries", func() bool {
		cs := b.srv.Connections()
		if len(cs) != 1 {
			return false
		}
		info = cs[0]
		return len(info.Channels) == 2 && statValue(b.srv.MessageStats(), "deliver") == 2
	})
	if info.ClientProperties["connection_name"] != "orders-service" || info.User != "guest" || info.VHost != "/" ||
		info.AuthMechanism != "PLAIN" || info.PeerHost != "127.0.0.1" || !strings.HasSuffix(info.Name, " -> "+b.addr) {
		t.Fatalf("connection: %+v", info)
	}
	var confirmCh, consumeCh ChannelInfo
	for _, ch := range info.Channels {
		if ch.Confirm {
			confirmCh = ch
		} else {
			consumeCh = ch
		}
	}
	if statValue(confirmCh.MessageStats, "publish") != 6 || statValue(confirmCh.MessageStats, "confirm") != 6 ||
		statValue(confirmCh.MessageStats, "drop_unroutable") != 1 || confirmCh.Unconfirmed != 0 {
		t.Fatalf("publishing channel: %+v", confirmCh)
	}
	if consumeCh.Prefetch != 2 || consumeCh.Unacknowledged != 2 || len(consumeCh.Consumers) != 1 {
		t.Fatalf("consuming channel: %+v", consumeCh)
	}
	if k := consumeCh.Consumers[0]; k.Tag != "c1" || k.Queue != "work" || !k.AckRequired || k.Prefetch != 2 || k.Args["x-priority"] != int32(3) {
		t.Fatalf("consumer: %+v", k)
	}
	if statValue(info.Traffic, "recv_oct") <= 0 || statValue(info.Traffic, "send_oct") <= 0 {
		t.Fatalf("traffic: %+v", info.Traffic)
	}

	// Closing the channels moves their counters into the totals, which
	// do not go down.
	before := statValue(b.srv.MessageStats(), "publish")
	if err := pub.ch.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "one channel left", func() bool { return len(b.srv.Connections()[0].Channels) == 1 })
	if after := statValue(b.srv.MessageStats(), "publish"); before != 6 || after != 6 {
		t.Fatalf("publish total %d before the close, %d after, want 6", before, after)
	}
}

// TestCloseConnectionByName: the client gets connection.close 320 with the
// reason, and its unacknowledged delivery goes back to the queue.
func TestCloseConnectionByName(t *testing.T) {
	b := startBroker(t)
	conn := b.dial()
	ch := openChannel(t, conn)
	declareQueue(t, ch, "q", false)
	if err := ch.PublishWithContext(context.Background(), "", "q", false, false, amqp091.Publishing{Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	next(t, consume(t, ch, "q", false)) // left unacknowledged
	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	if b.srv.CloseConnection("no such connection", "bye") {
		t.Fatal("closed a connection that does not exist")
	}
	cs := b.srv.Connections()
	if len(cs) != 1 || !b.srv.CloseConnection(cs[0].Name, "Closed via management plugin") {
		t.Fatalf("connections %+v: not closed", cs)
	}
	e := closeError(t, closed)
	if e.Code != 320 || e.Reason != "CONNECTION_FORCED - Closed via management plugin" || !e.Server {
		t.Fatalf("close: %+v", e)
	}
	waitFor(t, "the delivery requeued", func() bool { return b.queueInfo("q").Messages == 1 })
	waitFor(t, "the connection gone", func() bool { return len(b.srv.Connections()) == 0 })
}

// TestResources reports the alarms' limits and state.
func TestResources(t *testing.T) {
	b := startBroker(t, func(c *Config) { c.MemoryHighWatermark = 1 << 20; c.DataDir = t.TempDir() })
	r := b.srv.Resources()
	if r.MemoryLimit != 1<<20 || r.MemoryAlarm || r.DiskFreeLimit != DefaultDiskFreeLimit || r.DiskFree <= 0 {
		t.Fatalf("resources: %+v", r)
	}
}
