package amqp

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/mq"
	"github.com/wharf-mq/wharf/internal/rate"
)

// channel is one AMQP channel. The reader goroutine owns the fields above
// mu; the fields under mu are shared with the queues that deliver to the
// channel's consumers (TryDeliver) and with mq's cancel notifications.
type channel struct {
	c   *conn
	id  uint16
	asm amqpwire.Assembler

	// Reader only.
	closing   bool   // channel.close sent; waiting for close-ok
	lastQueue string // the queue most recently declared: "" in queue names means it
	// replies is the channel's consumer of amq.rabbitmq.reply-to, nil if
	// none: at most one, and requests published with that reply_to get
	// its name (direct reply-to).
	replies *consumer
	// Reader only, changed under mu so that the management API may read
	// them under mu (info.go).
	consumerPrefetch int // basic.qos global=false: the limit of consumers created from now on
	confirm          *confirmer
	tx               *txState

	// stats counts the channel's messages; retired (under the server's
	// stats.mu) says they have moved to the server's totals.
	stats   msgCounters
	rates   rate.Sampler
	retired bool

	// closedAsync is set when another goroutine closed the channel (the
	// consumer timeout); the reader then finishes the close.
	closedAsync atomic.Bool

	mu              sync.Mutex
	closed          bool
	nextTag         uint64 // last delivery tag used
	unacked         unackedSet
	prefetch        int // basic.qos global=true: the limit of the whole channel (0: none)
	consumerUnacked int // unacked deliveries to consumers, counted against prefetch
	consumers       map[string]*consumer
}

// openChannel handles a frame for a channel that is not open: only
// channel.open is allowed (else 504, hard), and only while fewer than
// channel_max channels are open (else 530, hard).
func (c *conn) openChannel(f amqpwire.Frame) error {
	id := amqpwire.MethodID(0)
	if f.Type == amqpwire.FrameMethod {
		id, _ = amqpwire.PeekMethodID(f.Payload)
	}
	if id != amqpwire.ChannelOpenID {
		e := amqpwire.Errorf(amqpwire.CodeChannelError, "expected 'channel.open' on channel %d", f.Channel)
		if id != 0 {
			e = e.In(id)
		}
		return e
	}
	// Like RabbitMQ, channel_max bounds how many channels are open, not
	// their numbers.
	if len(c.channels) >= int(c.channelMax) {
		return amqpwire.Errorf(amqpwire.CodeNotAllowed, "number of channels opened (%d) has reached the negotiated channel_max (%d)",
			len(c.channels), c.channelMax).In(id)
	}
	var open amqpwire.ChannelOpen
	if err := open.Decode(f.Payload); err != nil {
		return err
	}
	ch := &channel{c: c, id: f.Channel, consumers: make(map[string]*consumer)}
	ch.asm.MaxBodySize = c.srv.cfg.MaxMessageSize
	ch.unacked.init()
	c.chanMu.Lock()
	c.channels[f.Channel] = ch
	c.chanMu.Unlock()
	c.out.method(ch.id, &amqpwire.ChannelOpenOK{})
	return nil
}

// handle runs one complete command on the channel. Any command but a
// publish first flushes the publishes held back, so it acts after them
// (a queue.delete, a tx.commit, a consumer reading the stream, a close).
func (ch *channel) handle(cmd amqpwire.Command) error {
	if m, ok := cmd.Method.(*amqpwire.BasicPublish); ok {
		return ch.basicPublish(m, cmd.Content)
	}
	ch.c.flushPublishes()
	switch m := cmd.Method.(type) {
	case *amqpwire.BasicAck:
		return ch.basicAck(m)
	case *amqpwire.BasicNack:
		return ch.basicNack(m)
	case *amqpwire.BasicReject:
		return ch.basicReject(m)
	case *amqpwire.BasicConsume:
		return ch.basicConsume(m)
	case *amqpwire.BasicCancel:
		return ch.basicCancel(m)
	case *amqpwire.BasicCancelOK:
		return nil // the client's answer to a server-sent basic.cancel
	case *amqpwire.BasicGet:
		return ch.basicGet(m)
	case *amqpwire.BasicQos:
		return ch.basicQos(m)
	case *amqpwire.BasicRecover:
		return ch.basicRecover(m.Requeue, m)
	case *amqpwire.BasicRecoverAsync:
		return ch.basicRecover(m.Requeue, m)

	case *amqpwire.ExchangeDeclare:
		return ch.exchangeDeclare(m)
	case *amqpwire.ExchangeDelete:
		return ch.exchangeDelete(m)
	case *amqpwire.ExchangeBind:
		return ch.exchangeBind(m)
	case *amqpwire.ExchangeUnbind:
		return ch.exchangeUnbind(m)

	case *amqpwire.QueueDeclare:
		return ch.queueDeclare(m)
	case *amqpwire.QueueBind:
		return ch.queueBind(m)
	case *amqpwire.QueueUnbind:
		return ch.queueUnbind(m)
	case *amqpwire.QueuePurge:
		return ch.queuePurge(m)
	case *amqpwire.QueueDelete:
		return ch.queueDelete(m)

	case *amqpwire.ConfirmSelect:
		return ch.confirmSelect(m)
	case *amqpwire.TxSelect:
		return ch.txSelect(m)
	case *amqpwire.TxCommit:
		return ch.txCommit(m)
	case *amqpwire.TxRollback:
		return ch.txRollback(m)

	case *amqpwire.ChannelFlow:
		return ch.channelFlow(m)
	case *amqpwire.ChannelFlowOK:
		return nil // the client's answer to a flow we never send
	case *amqpwire.ChannelClose:
		ch.closeByClient()
		return nil
	case *amqpwire.ChannelCloseOK:
		return nil // no close of ours is outstanding: nothing to finish
	case *amqpwire.ChannelOpen:
		return amqpwire.Errorf(amqpwire.CodeChannelError, "second 'channel.open' seen").In(m.ID())
	case *amqpwire.AccessRequest:
		// Deprecated, but old clients still send it; RabbitMQ grants ticket 1.
		ch.c.out.method(ch.id, &amqpwire.AccessRequestOK{Ticket: 1})
		return nil
	}
	// Server-only methods (basic.deliver, queue.declare-ok, ...) and
	// connection methods on a channel.
	return amqpwire.Errorf(amqpwire.CodeCommandInvalid, "unimplemented method: %s", cmd.Method.Name()).In(cmd.Method.ID())
}

// fail handles an error raised on the channel: a soft one closes the
// channel with channel.close, a hard one is returned to close the
// connection.
func (ch *channel) fail(err error) error {
	ch.c.flushPublishes() // the channel's publishes before the error stand
	var we *amqpwire.Error
	if !errors.As(err, &we) {
		return err
	}
	if we.Hard {
		return we
	}
	ch.closeWithError(we)
	ch.enterClosing()
	return nil
}

// enterClosing switches the reader's view of the channel to "our
// channel.close is out": frames are discarded until close-ok.
func (ch *channel) enterClosing() {
	ch.closing = true
	ch.asm.Reset()
	ch.teardown()
}

// closeWithError closes the channel from the server side: channel.close
// with e goes out (once; false if the channel was already closed), then
// the channel's deliveries are released. Safe from any goroutine: the
// consumer timeout calls it from mq's timer goroutine, and the reader
// completes the close (enterClosing) when it next sees the channel.
func (ch *channel) closeWithError(e *amqpwire.Error) bool {
	ch.mu.Lock()
	if ch.closed {
		ch.mu.Unlock()
		return false
	}
	consumers, pending := ch.closeLocked() // no delivery is queued after this
	ch.mu.Unlock()
	ch.c.log.Debug("closing channel on error", "channel", ch.id, "code", e.Code, "text", e.Text)
	// Requeue first: a client that reacts to channel.close by looking at
	// the queue finds its messages there.
	ch.release(consumers, pending)
	ch.c.srv.retire(ch)
	ch.c.out.method(ch.id, e.CloseMethod())
	return true
}

// closingFrame handles a frame while our channel.close is outstanding:
// everything but close-ok (or the client's crossing close) is discarded,
// as the spec requires.
func (ch *channel) closingFrame(f amqpwire.Frame) {
	if f.Type != amqpwire.FrameMethod {
		return
	}
	switch id, _ := amqpwire.PeekMethodID(f.Payload); id {
	case amqpwire.ChannelCloseOKID:
		ch.c.forgetChannel(ch.id)
	case amqpwire.ChannelCloseID:
		ch.c.out.method(ch.id, &amqpwire.ChannelCloseOK{})
	}
}

// closeByClient answers the client's channel.close; the channel number is
// free again at once.
func (ch *channel) closeByClient() {
	ch.teardown()
	ch.c.forgetChannel(ch.id)
	ch.c.out.method(ch.id, &amqpwire.ChannelCloseOK{})
}

// teardown ends the channel's work: no more deliveries, consumers
// cancelled, unacknowledged deliveries (including acks of an uncommitted
// transaction) requeued, the confirm goroutine stopped. Idempotent; reader
// only.
func (ch *channel) teardown() {
	ch.mu.Lock()
	consumers, pending := ch.closeLocked()
	ch.mu.Unlock()
	ch.replies = nil
	ch.release(consumers, pending)
	ch.c.srv.retire(ch)

	// The reader's own state.
	if ch.tx != nil {
		ch.c.applySettlement(settleRequeue, ch.tx.takeSettled())
		ch.mu.Lock()
		ch.tx = nil
		ch.mu.Unlock()
	}
	if ch.confirm != nil {
		ch.confirm.stop()
	}
}

// closeLocked marks the channel closed, so TryDeliver refuses from now on,
// and takes its consumers and unacknowledged deliveries. Nothing the
// second time. ch.mu must be held.
func (ch *channel) closeLocked() ([]*consumer, []pendingDelivery) {
	if ch.closed {
		return nil, nil
	}
	ch.closed = true
	consumers := make([]*consumer, 0, len(ch.consumers))
	for _, k := range ch.consumers {
		k.cancelled = true
		consumers = append(consumers, k)
	}
	clear(ch.consumers)
	return consumers, ch.unacked.takeAll()
}

// release cancels the consumers and requeues the deliveries closeLocked
// took; mq puts requeued messages back at their original positions. No
// lock may be held.
func (ch *channel) release(consumers []*consumer, pending []pendingDelivery) {
	for _, k := range consumers {
		if sub := k.sub.Load(); sub != nil {
			sub.Cancel()
		}
	}
	ch.c.applySettlement(settleRequeue, pending)
}

// forgetChannel frees a channel number once the channel is closed.
func (c *conn) forgetChannel(id uint16) {
	c.chanMu.Lock()
	delete(c.channels, id)
	c.chanMu.Unlock()
}

// queueName resolves a queue argument: "" means the channel's most
// recently declared queue, as in RabbitMQ.
func (ch *channel) queueName(name string, id amqpwire.MethodID) (string, error) {
	if name != "" {
		return name, nil
	}
	if ch.lastQueue == "" {
		return "", amqpwire.Errorf(amqpwire.CodeNotFound, "no previously declared queue").In(id)
	}
	return ch.lastQueue, nil
}

// mqError attributes an error from mq to the method that caused it. mq's
// errors are *amqpwire.Error already; anything else is an internal failure,
// which closes the connection.
func mqError(err error, id amqpwire.MethodID) error {
	var we *amqpwire.Error
	if errors.As(err, &we) {
		e := *we
		return e.In(id)
	}
	if errors.Is(err, mq.ErrClosed) {
		return amqpwire.Errorf(amqpwire.CodeConnectionForced, "broker is shutting down").In(id)
	}
	return amqpwire.Errorf(amqpwire.CodeInternalError, "%v", err).In(id)
}

// reply queues a method on the channel unless the client asked for
// no-wait.
func (ch *channel) reply(noWait bool, m amqpwire.Method) {
	if !noWait {
		ch.c.out.method(ch.id, m)
	}
}
