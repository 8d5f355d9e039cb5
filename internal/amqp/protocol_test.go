package amqp

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

func TestWrongProtocolHeaderGetsOursBack(t *testing.T) {
	b := startBroker(t)
	nc, err := net.DialTimeout("tcp", b.addr, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(testTimeout))
	if _, err := io.WriteString(nc, "AMQP\x01\x01\x00\x0a"); err != nil { // AMQP 1.0
		t.Fatal(err)
	}
	got, err := io.ReadAll(nc)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != amqpwire.ProtocolHeader {
		t.Fatalf("got %q, want %q then EOF", got, amqpwire.ProtocolHeader)
	}
}

// TestProtocolViolations sends what no client library would and checks the
// reply code of the resulting close, and that the other connection
// carries on.
func TestProtocolViolations(t *testing.T) {
	b := startBroker(t)
	bystander := b.channel()
	declareQueue(t, bystander, "still-here", false)

	cases := []struct {
		name    string
		channel uint16 // 0: connection error
		code    uint16
		text    string
		act     func(c *rawClient)
	}{
		{"method on unopened channel", 0, amqpwire.CodeChannelError, "expected 'channel.open'", func(c *rawClient) {
			c.send(5, &amqpwire.QueueDeclare{Queue: "x"})
		}},
		{"second channel.open", 0, amqpwire.CodeChannelError, "second 'channel.open'", func(c *rawClient) {
			c.openChannel(1)
			c.send(1, &amqpwire.ChannelOpen{})
		}},
		{"content header without publish", 0, amqpwire.CodeUnexpectedFrame, "content header", func(c *rawClient) {
			c.openChannel(1)
			h := amqpwire.ContentHeader{ClassID: amqpwire.ClassBasic, BodySize: 1}
			payload, _ := h.Encode(nil)
			c.sendFrame(amqpwire.Frame{Type: amqpwire.FrameHeader, Channel: 1, Payload: payload})
		}},
		{"body frame without publish", 0, amqpwire.CodeUnexpectedFrame, "content body", func(c *rawClient) {
			c.openChannel(1)
			c.sendFrame(amqpwire.Frame{Type: amqpwire.FrameBody, Channel: 1, Payload: []byte("x")})
		}},
		{"method while content expected", 0, amqpwire.CodeUnexpectedFrame, "expected content header", func(c *rawClient) {
			c.openChannel(1)
			c.send(1, &amqpwire.BasicPublish{RoutingKey: "q"})
			c.send(1, &amqpwire.BasicQos{PrefetchCount: 1})
		}},
		{"frame over frame_max", 0, amqpwire.CodeFrameError, "frame", func(c *rawClient) {
			c.openChannel(1)
			// The server may close before the whole frame is written.
			c.w.WriteFrame(amqpwire.Frame{Type: amqpwire.FrameBody, Channel: 1, Payload: make([]byte, DefaultFrameMax)})
			c.w.Flush()
		}},
		{"unknown method", 0, amqpwire.CodeNotImplemented, "unknown method", func(c *rawClient) {
			c.openChannel(1)
			c.sendFrame(amqpwire.Frame{Type: amqpwire.FrameMethod, Channel: 1, Payload: []byte{0, 60, 0, 99}})
		}},
		{"second start-ok", 0, amqpwire.CodeChannelError, "unexpected method in connection state running", func(c *rawClient) {
			c.send(0, &amqpwire.ConnectionStartOK{Mechanism: "PLAIN", Response: "\x00guest\x00guest"})
		}},
		{"server method from client", 0, amqpwire.CodeCommandInvalid, "basic.deliver", func(c *rawClient) {
			c.openChannel(1)
			c.sendContent(1, &amqpwire.BasicDeliver{ConsumerTag: "x", DeliveryTag: 1}, &amqpwire.Properties{}, nil)
		}},
		{"immediate publish", 0, amqpwire.CodeNotImplemented, "immediate=true", func(c *rawClient) {
			c.openChannel(1)
			c.sendContent(1, &amqpwire.BasicPublish{RoutingKey: "still-here", Immediate: true}, &amqpwire.Properties{}, []byte("x"))
		}},
		{"unknown delivery tag", 1, amqpwire.CodePreconditionFailed, "unknown delivery tag 42", func(c *rawClient) {
			c.openChannel(1)
			c.send(1, &amqpwire.BasicAck{DeliveryTag: 42})
		}},
		{"prefetch_size", 0, amqpwire.CodeNotImplemented, "prefetch_size", func(c *rawClient) {
			c.openChannel(1)
			c.send(1, &amqpwire.BasicQos{PrefetchSize: 1000})
		}},
		{"channel.flow active=false", 0, amqpwire.CodeNotImplemented, "active=false", func(c *rawClient) {
			c.openChannel(1)
			c.send(1, &amqpwire.ChannelFlow{Active: false})
		}},
		{"recover requeue=false", 0, amqpwire.CodeNotImplemented, "requeue=false", func(c *rawClient) {
			c.openChannel(1)
			c.send(1, &amqpwire.BasicRecover{Requeue: false})
		}},
		{"publish to missing exchange", 1, amqpwire.CodeNotFound, "no exchange 'nope'", func(c *rawClient) {
			c.openChannel(1)
			c.sendContent(1, &amqpwire.BasicPublish{Exchange: "nope"}, &amqpwire.Properties{}, []byte("x"))
		}},
		{"body over max message size", 1, amqpwire.CodePreconditionFailed, "max size", func(c *rawClient) {
			c.openChannel(1)
			c.send(1, &amqpwire.BasicPublish{RoutingKey: "still-here"})
			h := amqpwire.ContentHeader{ClassID: amqpwire.ClassBasic, BodySize: DefaultMaxMessageSize + 1}
			payload, _ := h.Encode(nil)
			c.sendFrame(amqpwire.Frame{Type: amqpwire.FrameHeader, Channel: 1, Payload: payload})
		}},
		{"user_id mismatch", 1, amqpwire.CodePreconditionFailed, "user_id property set to 'mallory'", func(c *rawClient) {
			c.openChannel(1)
			c.sendContent(1, &amqpwire.BasicPublish{RoutingKey: "still-here"}, &amqpwire.Properties{UserID: "mallory"}, nil)
		}},
		{"tx and confirm", 1, amqpwire.CodePreconditionFailed, "cannot switch from tx to confirm mode", func(c *rawClient) {
			c.openChannel(1)
			c.send(1, &amqpwire.TxSelect{})
			c.expect(1, amqpwire.TxSelectOKID)
			c.send(1, &amqpwire.ConfirmSelect{})
		}},
		{"confirm and tx", 1, amqpwire.CodePreconditionFailed, "cannot switch from confirm to tx mode", func(c *rawClient) {
			c.openChannel(1)
			c.send(1, &amqpwire.ConfirmSelect{})
			c.expect(1, amqpwire.ConfirmSelectOKID)
			c.send(1, &amqpwire.TxSelect{})
		}},
		{"commit without tx", 1, amqpwire.CodePreconditionFailed, "not transactional", func(c *rawClient) {
			c.openChannel(1)
			c.send(1, &amqpwire.TxCommit{})
		}},
		{"reused consumer tag", 0, amqpwire.CodeNotAllowed, "reuse consumer tag", func(c *rawClient) {
			c.openChannel(1)
			c.send(1, &amqpwire.BasicConsume{Queue: "still-here", ConsumerTag: "t"})
			c.expect(1, amqpwire.BasicConsumeOKID)
			c.send(1, &amqpwire.BasicConsume{Queue: "still-here", ConsumerTag: "t"})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, b.addr, 0)
			tc.act(c)
			text := c.expectClose(tc.channel, tc.code)
			if !strings.Contains(text, tc.text) {
				t.Errorf("reply text %q does not mention %q", text, tc.text)
			}
			if tc.channel != 0 {
				// A soft error leaves the connection usable, and the
				// channel number free again after close-ok.
				c.openChannel(tc.channel)
				c.send(tc.channel, &amqpwire.QueueDeclare{Queue: "still-here", Passive: true})
				c.expect(tc.channel, amqpwire.QueueDeclareOKID)
				return
			}
			c.expectEOF()
		})
	}
	if _, err := bystander.QueueDeclarePassive("still-here", false, false, false, false, nil); err != nil {
		t.Fatalf("another connection was disturbed: %v", err)
	}
}

// TestChannelMax: the negotiated channel_max bounds open channels (530).
func TestChannelMax(t *testing.T) {
	b := startBroker(t, func(c *Config) { c.ChannelMax = 2 })
	c := dialRaw(t, b.addr, 0)
	c.openChannel(1)
	c.openChannel(2)
	c.send(3, &amqpwire.ChannelOpen{})
	if text := c.expectClose(0, amqpwire.CodeNotAllowed); !strings.Contains(text, "channel_max") {
		t.Errorf("text %q", text)
	}

	c = dialRaw(t, b.addr, 0)
	c.openChannel(1)
	c.openChannel(2)
	c.send(2, &amqpwire.ChannelClose{})
	c.expect(2, amqpwire.ChannelCloseOKID)
	c.openChannel(2) // a closed channel frees its slot
}

// TestFramesDiscardedWhileChannelCloses: after a soft error the server
// ignores the channel's frames until close-ok, including the rest of a
// message that was being published.
func TestFramesDiscardedWhileChannelCloses(t *testing.T) {
	b := startBroker(t)
	c := dialRaw(t, b.addr, 0)
	c.openChannel(1)
	c.send(1, &amqpwire.BasicAck{DeliveryTag: 7}) // 406
	c.sendContent(1, &amqpwire.BasicPublish{RoutingKey: "nowhere"}, &amqpwire.Properties{}, []byte("ignored"))
	c.send(1, &amqpwire.QueueDeclare{Queue: "ignored"})
	c.expectClose(1, amqpwire.CodePreconditionFailed)
	c.openChannel(1)
	c.send(1, &amqpwire.QueueDeclare{Queue: "ignored", Passive: true})
	c.expectClose(1, amqpwire.CodeNotFound) // the declare sent while closing did nothing
}

// TestMandatoryReturnPrecedesConfirm checks frame order: basic.return for
// an unroutable mandatory message arrives before its basic.ack, and an
// unroutable message without mandatory is acked without a return.
func TestMandatoryReturnPrecedesConfirm(t *testing.T) {
	b := startBroker(t)
	c := dialRaw(t, b.addr, 0)
	c.openChannel(1)
	c.send(1, &amqpwire.ConfirmSelect{})
	c.expect(1, amqpwire.ConfirmSelectOKID)

	c.sendContent(1, &amqpwire.BasicPublish{RoutingKey: "no-such-queue", Mandatory: true}, &amqpwire.Properties{}, []byte("m"))
	ret := c.expect(1, amqpwire.BasicReturnID).(*amqpwire.BasicReturn)
	if ret.ReplyCode != amqpwire.CodeNoRoute || ret.ReplyText != "NO_ROUTE" || ret.RoutingKey != "no-such-queue" {
		t.Errorf("return = %+v", ret)
	}
	if f := c.readFrame(); f.Type != amqpwire.FrameHeader {
		t.Fatalf("got %s frame after basic.return, want its content header", f.Type)
	}
	if f := c.readFrame(); f.Type != amqpwire.FrameBody || string(f.Payload) != "m" {
		t.Fatalf("returned body = %s %q", f.Type, f.Payload)
	}
	if ack := c.expect(1, amqpwire.BasicAckID).(*amqpwire.BasicAck); ack.DeliveryTag != 1 {
		t.Errorf("ack = %+v, want tag 1", ack)
	}

	c.sendContent(1, &amqpwire.BasicPublish{RoutingKey: "no-such-queue"}, &amqpwire.Properties{}, []byte("dropped"))
	if ack := c.expect(1, amqpwire.BasicAckID).(*amqpwire.BasicAck); ack.DeliveryTag != 2 {
		t.Errorf("ack = %+v, want tag 2", ack)
	}
	if got := b.vhost().Unroutable(); got != 2 {
		t.Errorf("unroutable counter = %d, want 2", got)
	}
}

// TestConfirmsCoalesce publishes a burst in one write and checks that the
// acks are multiple=true, in order, and cover every publish exactly.
func TestConfirmsCoalesce(t *testing.T) {
	b := startBroker(t)
	ch := b.channel()
	declareQueue(t, ch, "burst", true)

	c := dialRaw(t, b.addr, 0)
	c.openChannel(1)
	c.send(1, &amqpwire.ConfirmSelect{})
	c.expect(1, amqpwire.ConfirmSelectOKID)
	const n = 500
	for i := range n {
		mode := uint8(1)
		if i%2 == 0 {
			mode = 2 // persistent to a durable queue: waits for an fsync
		}
		if err := c.w.WriteContent(1, &amqpwire.BasicPublish{RoutingKey: "burst"}, &amqpwire.Properties{DeliveryMode: mode}, body(i)); err != nil {
			t.Fatal(err)
		}
	}
	c.flush()
	var last uint64
	frames := 0
	for last < n {
		ack := c.expect(1, amqpwire.BasicAckID).(*amqpwire.BasicAck)
		frames++
		if !ack.Multiple || ack.DeliveryTag <= last {
			t.Fatalf("ack %+v after %d: want multiple=true and a higher tag", ack, last)
		}
		last = ack.DeliveryTag
	}
	if last != n {
		t.Fatalf("last ack %d, want %d", last, n)
	}
	t.Logf("%d publishes confirmed by %d ack frames", n, frames)
	if got := b.queueInfo("burst").Messages; got != n {
		t.Errorf("queue holds %d, want %d", got, n)
	}
}

// TestHeartbeats: with a 1 s heartbeat the server sends heartbeats and,
// when the client stays silent, closes the connection after two missed
// intervals.
func TestHeartbeats(t *testing.T) {
	b := startBroker(t)
	c := dialRaw(t, b.addr, 1)
	start := time.Now()
	heartbeats := 0
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			break
		}
		if f.Type == amqpwire.FrameHeartbeat {
			heartbeats++
		}
	}
	elapsed := time.Since(start)
	if heartbeats < 2 {
		t.Errorf("got %d heartbeats before the close, want at least 2", heartbeats)
	}
	if elapsed < 1500*time.Millisecond || elapsed > 5*time.Second {
		t.Errorf("silent connection closed after %v, want about 2 s", elapsed)
	}
}

// TestHeartbeatsKeepConnectionAlive: a client that sends heartbeats stays
// connected past the timeout.
func TestHeartbeatsKeepConnectionAlive(t *testing.T) {
	b := startBroker(t)
	c := dialRaw(t, b.addr, 1)
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if err := c.w.WriteHeartbeat(); err != nil {
			t.Fatal(err)
		}
		c.flush()
		c.nc.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		for { // read what the server sends meanwhile
			if _, err := c.fr.ReadFrame(); err != nil {
				if isTimeout(err) {
					break
				}
				t.Fatalf("connection closed although the client sent heartbeats: %v", err)
			}
		}
	}
	c.nc.SetDeadline(time.Now().Add(testTimeout))
	c.openChannel(1)
}
