package amqp

import (
	"crypto/rand"
	"encoding/base64"
	"sync/atomic"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/mq"
)

// consumer is one basic.consume subscription; it is the mq.Consumer the
// queue hands deliveries to.
type consumer struct {
	ch        *channel
	tag       string
	queue     string
	noAck     bool
	exclusive bool
	args      amqpwire.Table // basic.consume's arguments, as sent
	prefetch  int            // per-consumer limit fixed at consume time (0: none)
	sub       atomic.Pointer[mq.Subscription]

	// Under ch.mu.
	unacked   int
	ready     bool // basic.consume-ok queued: deliveries may follow it
	cancelled bool
	starved   bool // refused for lack of credit (or before ready): resume when credited

	// Under ch.c.out.mu.
	outStarved bool // refused because the connection's writer is full
}

// TryDeliver implements mq.Consumer. It runs on a queue's goroutine with
// the queue's lock held, so it never blocks and never calls into mq: it
// checks credit, assigns the delivery tag and queues the frame for the
// writer, all under the channel's lock so tags reach the wire in order.
func (k *consumer) TryDeliver(d *mq.Delivery) bool {
	ch := k.ch
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.closed || k.cancelled {
		return false
	}
	if !k.ready || (!k.noAck && !k.hasCreditLocked()) {
		k.starved = true
		return false
	}
	tag := ch.nextTag + 1
	it := outItem{
		kind:        outDeliver,
		channel:     ch.id,
		msg:         d.Message,
		tag:         tag,
		consumerTag: k.tag,
		redelivered: d.Redelivered,
		size:        deliverySize(d.Message),
	}
	if !ch.c.out.deliver(it, k) {
		return false
	}
	ch.nextTag = tag
	ch.countHandedOver(true, k.noAck, d.Redelivered)
	if !k.noAck {
		ch.unacked.add(pendingDelivery{tag: tag, queue: d.Queue, qtag: d.Tag, cons: k})
		k.unacked++
		ch.consumerUnacked++
	}
	return true
}

// hasCreditLocked reports whether both the consumer's and the channel's
// prefetch allow one more unacknowledged delivery. ch.mu must be held.
func (k *consumer) hasCreditLocked() bool {
	if k.prefetch > 0 && k.unacked >= k.prefetch {
		return false
	}
	ch := k.ch
	return ch.prefetch == 0 || ch.consumerUnacked < ch.prefetch
}

// resume asks the queue to try this consumer again. No lock may be held.
func (k *consumer) resume() {
	if sub := k.sub.Load(); sub != nil {
		sub.Resume()
	}
}

// cancelledByQueue is ConsumeSpec.Cancelled: the queue was deleted. With
// consumer_cancel_notify the client is told with a server-sent basic.cancel
// (RabbitMQ's behaviour); the consumer's unacked deliveries stay with the
// channel.
func (k *consumer) cancelledByQueue() {
	ch := k.ch
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if k.cancelled || ch.closed {
		return
	}
	k.cancelled = true
	if ch.consumers[k.tag] == k {
		delete(ch.consumers, k.tag)
	}
	if ch.c.caps.cancelNotify {
		ch.c.out.method(ch.id, &amqpwire.BasicCancel{ConsumerTag: k.tag, NoWait: true})
	}
}

// DeliveryTimedOut implements mq.TimeoutNotifier: a delivery stayed
// unacknowledged past the consumer timeout. As RabbitMQ does, the channel is
// closed with 406, which requeues its unacknowledged deliveries. Called on
// mq's timer goroutine.
func (k *consumer) DeliveryTimedOut(_ mq.QueueTag, timeout time.Duration) {
	ch := k.ch
	e := amqpwire.Errorf(amqpwire.CodePreconditionFailed,
		"delivery acknowledgement on channel %d timed out. Timeout value used: %d ms. "+
			"This timeout value can be configured, see consumers doc guide to learn more",
		ch.id, timeout.Milliseconds())
	if ch.closeWithError(e) {
		ch.closedAsync.Store(true)
	}
}

func (ch *channel) basicConsume(m *amqpwire.BasicConsume) error {
	queue, err := ch.queueName(m.Queue, m.ID())
	if err != nil {
		return err
	}
	replies := queue == mq.ReplyToQueue
	switch {
	case replies && m.NoAck && ch.replies != nil: // an ack-mode one is mq's 406 "cannot acknowledge", as RabbitMQ checks that first
		return amqpwire.Errorf(amqpwire.CodePreconditionFailed, "reply consumer already set").In(m.ID())
	case replies: // no queue to read: RabbitMQ checks no permission
	default:
		if err := ch.c.access.ReadQueue(queue); err != nil {
			return mqError(err, m.ID())
		}
	}
	tag := m.ConsumerTag
	if tag == "" {
		tag = newConsumerTag()
	}
	k := &consumer{ch: ch, tag: tag, queue: queue, noAck: m.NoAck, exclusive: m.Exclusive, args: m.Arguments,
		prefetch: ch.consumerPrefetch}

	ch.mu.Lock()
	if _, dup := ch.consumers[tag]; dup {
		ch.mu.Unlock()
		return amqpwire.Errorf(amqpwire.CodeNotAllowed, "attempt to reuse consumer tag '%s'", tag).In(m.ID())
	}
	ch.consumers[tag] = k
	globalPrefetch := ch.prefetch
	ch.mu.Unlock()

	sub, err := ch.c.vhost.Consume(queue, mq.ConsumeSpec{
		Tag:            tag,
		NoAck:          m.NoAck,
		Exclusive:      m.Exclusive,
		Args:           m.Arguments,
		Conn:           ch.c.id,
		Consumer:       k,
		Cancelled:      k.cancelledByQueue,
		Prefetch:       k.prefetch,
		GlobalPrefetch: globalPrefetch,
	})
	if err != nil {
		ch.mu.Lock()
		if ch.consumers[tag] == k {
			delete(ch.consumers, tag)
		}
		ch.mu.Unlock()
		return mqError(err, m.ID())
	}
	k.sub.Store(sub)
	if replies {
		ch.replies = k
	}

	// consume-ok goes out before any delivery: until now TryDeliver refused.
	ch.mu.Lock()
	ch.reply(m.NoWait, &amqpwire.BasicConsumeOK{ConsumerTag: tag})
	k.ready = true
	k.starved = false
	ch.mu.Unlock()
	sub.Resume()
	return nil
}

func (ch *channel) basicCancel(m *amqpwire.BasicCancel) error {
	ch.mu.Lock()
	k := ch.consumers[m.ConsumerTag]
	if k != nil {
		delete(ch.consumers, m.ConsumerTag)
		k.cancelled = true
	}
	ch.mu.Unlock()
	if k != nil && k == ch.replies {
		ch.replies = nil // requests with reply_to amq.rabbitmq.reply-to fail from now on, as in RabbitMQ
	}
	if k != nil {
		if sub := k.sub.Load(); sub != nil {
			sub.Cancel()
		}
	}
	// RabbitMQ answers cancel-ok for unknown tags too.
	ch.reply(m.NoWait, &amqpwire.BasicCancelOK{ConsumerTag: m.ConsumerTag})
	return nil
}

// newConsumerTag makes a server-generated consumer tag as RabbitMQ does:
// "amq.ctag-" and 22 characters of URL-safe base64.
func newConsumerTag() string {
	var b [16]byte
	rand.Read(b[:])
	return "amq.ctag-" + base64.RawURLEncoding.EncodeToString(b[:])
}
