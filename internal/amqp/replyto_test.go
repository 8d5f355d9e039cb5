package amqp

import (
	"context"
	"strings"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/wharf-mq/wharf/internal/mq"
)

// Direct reply-to, each behaviour as RabbitMQ 4.2 has it (its
// direct_reply_to_amqpl_SUITE and rabbit_channel): the requester consumes
// amq.rabbitmq.reply-to in no-ack mode, its requests' reply_to is
// rewritten to a name of its own, and replies published under that name
// reach it with no queue.

// replyConsumer starts a no-ack consumer of amq.rabbitmq.reply-to on ch.
func replyConsumer(t *testing.T, ch *amqp091.Channel, tag string) <-chan amqp091.Delivery {
	t.Helper()
	d, err := ch.Consume(mq.ReplyToQueue, tag, true, false, false, false, nil)
	if err != nil {
		t.Fatalf("consume %s: %v", mq.ReplyToQueue, err)
	}
	return d
}

// sendRequest publishes a request with reply_to amq.rabbitmq.reply-to to
// queue on the requester's channel and returns the name the responder
// gets in its reply_to.
func sendRequest(t *testing.T, requester, responder *amqp091.Channel, queue string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	err := requester.PublishWithContext(ctx, "", queue, false, false,
		amqp091.Publishing{ReplyTo: mq.ReplyToQueue, CorrelationId: "req-1", Body: []byte("request")})
	if err != nil {
		t.Fatalf("publish request: %v", err)
	}
	var got amqp091.Delivery
	waitFor(t, "the request", func() bool {
		d, ok, err := responder.Get(queue, true)
		if err != nil {
			t.Fatalf("get request: %v", err)
		}
		got = d
		return ok
	})
	if got.CorrelationId != "req-1" || string(got.Body) != "request" {
		t.Fatalf("request %+v", got)
	}
	if !strings.HasPrefix(got.ReplyTo, mq.ReplyToQueue+".") || len(got.ReplyTo) < len(mq.ReplyToQueue)+10 {
		t.Fatalf("reply_to %q: not rewritten to a reply name", got.ReplyTo)
	}
	return got.ReplyTo
}

func TestDirectReplyToRoundTrip(t *testing.T) {
	b := startBroker(t)
	requester, responder := b.channel(), b.channel()
	replies := replyConsumer(t, requester, "replies")
	declareQueue(t, responder, "rpc", false)
	name := sendRequest(t, requester, responder, "rpc")

	// The responder checks that the requester is still there: a declare,
	// passive or not, answers 0 messages and 1 consumer.
	for _, passive := range []bool{true, false} {
		declare := responder.QueueDeclare
		if passive {
			declare = responder.QueueDeclarePassive
		}
		q, err := declare(name, false, false, false, false, nil)
		if err != nil || q.Name != name || q.Messages != 0 || q.Consumers != 1 {
			t.Fatalf("declare passive=%v: %+v, %v", passive, q, err)
		}
	}

	// The reply, under the name as routing key and then in CC, confirmed.
	pub := newConfirmedPublisher(t, responder)
	if !pub.publish("", name, amqp091.Publishing{CorrelationId: "req-1", Body: []byte("reply 1")}) {
		t.Fatal("reply 1 nacked")
	}
	if !pub.publish("", "nowhere", amqp091.Publishing{CorrelationId: "req-1", Body: []byte("reply 2"),
		Headers: amqp091.Table{"CC": []any{name}}}) {
		t.Fatal("reply 2 nacked")
	}
	for i, want := range []string{"reply 1", "reply 2"} {
		d := next(t, replies)
		if string(d.Body) != want || d.ConsumerTag != "replies" || d.CorrelationId != "req-1" || d.Exchange != "" ||
			d.Redelivered {
			t.Fatalf("reply %d: %+v", i+1, d)
		}
	}

	// The requester cancels: its name is gone, and so is its reply_to.
	if err := requester.Cancel("replies", false); err != nil {
		t.Fatal(err)
	}
	_, err := responder.QueueDeclarePassive(name, false, false, false, false, nil)
	if e := wantCode(t, err, amqp091.NotFound); e.Reason != "NOT_FOUND - no queue '"+name+"' in vhost '/'" {
		t.Fatalf("declare after cancel: %q", e.Reason)
	}
	closed := requester.NotifyClose(make(chan *amqp091.Error, 1))
	requester.Publish("", "rpc", false, false, amqp091.Publishing{ReplyTo: mq.ReplyToQueue})
	if e := closeError(t, closed); e.Code != amqp091.PreconditionFailed ||
		e.Reason != "PRECONDITION_FAILED - fast reply consumer does not exist" {
		t.Fatalf("request after cancel: %d %q", e.Code, e.Reason)
	}
}

// A requester replying to itself, in confirm mode, gets its confirm and
// the reply (RabbitMQ's "odd, but should work").
func TestDirectReplyToSelf(t *testing.T) {
	b := startBroker(t)
	ch, responder := b.channel(), b.channel()
	replies := replyConsumer(t, ch, "")
	declareQueue(t, ch, "rpc", false)
	name := sendRequest(t, ch, responder, "rpc")
	if !newConfirmedPublisher(t, ch).publish("", name, amqp091.Publishing{Body: []byte("to myself")}) {
		t.Fatal("nacked")
	}
	if d := next(t, replies); string(d.Body) != "to myself" || d.RoutingKey != name {
		t.Fatalf("got %+v", d)
	}
}

func TestDirectReplyToConsumeErrors(t *testing.T) {
	b := startBroker(t)
	for _, tc := range []struct {
		name   string
		setup  func(ch *amqp091.Channel)
		noAck  bool
		reason string
	}{
		{"ack mode", func(*amqp091.Channel) {}, false, "PRECONDITION_FAILED - reply consumer cannot acknowledge"},
		{"second consumer", func(ch *amqp091.Channel) { replyConsumer(t, ch, "") }, true,
			"PRECONDITION_FAILED - reply consumer already set"},
		{"second consumer in ack mode", func(ch *amqp091.Channel) { replyConsumer(t, ch, "") }, false,
			"PRECONDITION_FAILED - reply consumer cannot acknowledge"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch := b.channel()
			tc.setup(ch)
			_, err := ch.Consume(mq.ReplyToQueue, "", tc.noAck, false, false, false, nil)
			if e := wantCode(t, err, amqp091.PreconditionFailed); e.Reason != tc.reason {
				t.Fatalf("got %q, want %q", e.Reason, tc.reason)
			}
		})
	}
	// One per channel: two channels of one connection each have theirs.
	conn := b.dial()
	replyConsumer(t, openChannel(t, conn), "")
	replyConsumer(t, openChannel(t, conn), "")
}

// A request with reply_to amq.rabbitmq.reply-to on a channel that has no
// reply consumer (another channel of the connection has one) closes the
// channel with RabbitMQ's 406.
func TestDirectReplyToWithoutConsumer(t *testing.T) {
	b := startBroker(t)
	conn := b.dial()
	replyConsumer(t, openChannel(t, conn), "")
	ch := openChannel(t, conn)
	declareQueue(t, ch, "rpc", false)
	closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
	ch.Publish("", "rpc", false, false, amqp091.Publishing{ReplyTo: mq.ReplyToQueue})
	if e := closeError(t, closed); e.Code != amqp091.PreconditionFailed ||
		e.Reason != "PRECONDITION_FAILED - fast reply consumer does not exist" {
		t.Fatalf("got %d %q", e.Code, e.Reason)
	}
	if n := b.queueInfo("rpc").Messages; n != 0 {
		t.Fatalf("the refused request was enqueued: %d messages", n)
	}
}

// A reply to a requester that is gone is routed (no basic.return for a
// mandatory one) and acked, as RabbitMQ 4.2 does: it does not check that
// the requester is there when it routes. A name that is not one of the
// node's reply names routes nowhere: returned if mandatory.
func TestDirectReplyToRequesterGone(t *testing.T) {
	b := startBroker(t)
	requesterConn := b.dial()
	requester, responder := openChannel(t, requesterConn), b.channel()
	replyConsumer(t, requester, "")
	declareQueue(t, responder, "rpc", false)
	name := sendRequest(t, requester, responder, "rpc")
	if err := requesterConn.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := b.channel().QueueDeclarePassive(name, false, false, false, false, nil)
	wantCode(t, err, amqp091.NotFound)

	if err := responder.Confirm(false); err != nil {
		t.Fatal(err)
	}
	returns := responder.NotifyReturn(make(chan amqp091.Return, 2))
	publish := func(key string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		dc, err := responder.PublishWithDeferredConfirmWithContext(ctx, "", key, true, false, amqp091.Publishing{Body: []byte("reply")})
		if err != nil {
			t.Fatal(err)
		}
		// basic.return comes before the confirm, and amqp091-go hands
		// it over before it reads on.
		if ok, err := dc.WaitContext(ctx); !ok || err != nil {
			t.Fatalf("reply to %q: ack %v, %v", key, ok, err)
		}
	}
	publish(name)
	if len(returns) != 0 {
		t.Fatalf("a reply to a gone requester was returned: %+v", <-returns)
	}
	for _, bogus := range []string{mq.ReplyToQueue + ".bogus", mq.ReplyToQueue + ".7." + name[strings.LastIndex(name, ".")+1:]} {
		publish(bogus)
		if len(returns) != 1 {
			t.Fatalf("a reply to %q was not returned", bogus)
		}
		if r := <-returns; r.ReplyCode != amqp091.NoRoute || r.RoutingKey != bogus {
			t.Fatalf("return %+v", r)
		}
	}
}

// The reply consumer is listed nowhere, as in RabbitMQ: it consumes no
// queue.
func TestDirectReplyToConsumerNotListed(t *testing.T) {
	b := startBroker(t)
	ch := b.channel()
	replyConsumer(t, ch, "")
	if _, err := ch.QueueDeclare("work", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	consume(t, ch, "work", true)
	cs := b.srv.Connections()
	if len(cs) != 1 || len(cs[0].Channels) != 1 {
		t.Fatalf("connections %+v", cs)
	}
	if got := cs[0].Channels[0].Consumers; len(got) != 1 || got[0].Queue != "work" {
		t.Fatalf("consumers listed %+v, want the one of work only", got)
	}
}

// amq.rabbitmq.reply-to itself always declares, as in RabbitMQ.
func TestDirectReplyToDeclarePseudoQueue(t *testing.T) {
	b := startBroker(t)
	ch := b.channel()
	for _, passive := range []bool{true, false} {
		declare := ch.QueueDeclare
		if passive {
			declare = ch.QueueDeclarePassive
		}
		q, err := declare(mq.ReplyToQueue, false, false, false, false, nil)
		if err != nil || q.Name != mq.ReplyToQueue || q.Messages != 0 || q.Consumers != 1 {
			t.Fatalf("declare passive=%v: %+v, %v", passive, q, err)
		}
	}
}

// A reply name is no queue: binding it is 403 and basic.get 540, RabbitMQ's
// texts.
func TestDirectReplyToNamesAreNoQueues(t *testing.T) {
	b := startBroker(t)
	requester, responder := b.channel(), b.channel()
	replyConsumer(t, requester, "")
	declareQueue(t, responder, "rpc", false)
	name := sendRequest(t, requester, responder, "rpc")

	err := b.channel().QueueBind(name, "k", "amq.direct", false, nil)
	if e := wantCode(t, err, amqp091.AccessRefused); e.Reason != "ACCESS_REFUSED - cannot bind or unbind to a volatile (direct reply-to) queue" {
		t.Fatalf("bind: %q", e.Reason)
	}
	_, _, err = b.channel().Get(name, true)
	if e := wantCode(t, err, amqp091.NotImplemented); e.Reason != "NOT_IMPLEMENTED - basic.get not supported by volatile queue '"+name+"' in vhost '/'" {
		t.Fatalf("get: %q", e.Reason)
	}
}
