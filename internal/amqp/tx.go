package amqp

import (
	"errors"

	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/mq"
)

// txState is a transactional channel's uncommitted work: publishes held
// back until tx.commit, and settlements (ack, nack, reject) whose deliveries
// have left the unacked set but not yet reached their queues.
type txState struct {
	publishes []txPublish
	settles   []txSettle
}

type txPublish struct {
	msg       *mq.Message
	mandatory bool
}

type txSettle struct {
	op    settleOp
	taken []pendingDelivery
}

func (ch *channel) txSelect(m *amqpwire.TxSelect) error {
	if ch.confirm != nil {
		return amqpwire.Errorf(amqpwire.CodePreconditionFailed, "cannot switch from confirm to tx mode").In(m.ID())
	}
	if ch.tx == nil {
		ch.mu.Lock()
		ch.tx = &txState{}
		ch.mu.Unlock()
	}
	ch.c.out.method(ch.id, &amqpwire.TxSelectOK{})
	return nil
}

// publish holds a message for commit. Like RabbitMQ the exchange must
// exist at publish time.
func (tx *txState) publish(ch *channel, msg *mq.Message, m *amqpwire.BasicPublish) error {
	if msg.Exchange != "" {
		if err := ch.c.vhost.DeclareExchange(mq.ExchangeDef{Name: msg.Exchange}, true); err != nil {
			return mqError(err, m.ID())
		}
	}
	tx.publishes = append(tx.publishes, txPublish{msg: msg, mandatory: m.Mandatory})
	return nil
}

func (tx *txState) settle(op settleOp, taken []pendingDelivery) {
	tx.settles = append(tx.settles, txSettle{op: op, taken: taken})
}

// takeSettled returns and forgets every delivery of the uncommitted
// settlements.
func (tx *txState) takeSettled() []pendingDelivery {
	var all []pendingDelivery
	for _, s := range tx.settles {
		all = append(all, s.taken...)
	}
	tx.settles = nil
	return all
}

// txCommit publishes the held messages, waits until the persistent ones
// are on disk, applies the held settlements and answers commit-ok.
func (ch *channel) txCommit(m *amqpwire.TxCommit) error {
	tx := ch.tx
	if tx == nil {
		return amqpwire.Errorf(amqpwire.CodePreconditionFailed, "channel is not transactional").In(m.ID())
	}
	c := ch.c
	publishes, settles := tx.publishes, tx.settles
	tx.publishes, tx.settles = nil, nil

	// The messages go through the connection's publisher, so their stream
	// records are appended as one batch and their fsyncs waited for once.
	var durable []mq.Durability
	pub := c.publisher()
	for i, p := range publishes {
		res, err := pub.Publish(p.msg)
		publishes[i] = txPublish{}
		if err != nil {
			pub.Flush()
			return mqError(err, m.ID())
		}
		ch.countPublished(res, p.mandatory)
		if res.Routed == 0 && p.mandatory {
			ch.returnMessage(p.msg)
		}
		if res.Durable.Pending() {
			durable = append(durable, res.Durable)
		}
	}
	pub.Flush()
	c.srv.alarms.checkMemory()
	for _, d := range durable {
		select {
		case <-d.Done():
			// A message its stream refused is dropped, not a failed
			// commit, as a full queue's refusal is.
			if err := d.Err(); err != nil && !errors.Is(err, mq.ErrStreamRefused) {
				return amqpwire.Errorf(amqpwire.CodeInternalError, "commit failed: %v", err).In(m.ID())
			}
		case <-c.abort:
			return errAborted
		}
	}
	for _, s := range settles {
		ch.settle(s.op, s.taken)
	}
	c.out.method(ch.id, &amqpwire.TxCommitOK{})
	return nil
}

// txRollback drops the held publishes; deliveries acked in the transaction
// become unacknowledged again, as in RabbitMQ.
func (ch *channel) txRollback(m *amqpwire.TxRollback) error {
	tx := ch.tx
	if tx == nil {
		return amqpwire.Errorf(amqpwire.CodePreconditionFailed, "channel is not transactional").In(m.ID())
	}
	tx.publishes = nil
	restored := tx.takeSettled()
	ch.mu.Lock()
	ch.unacked.restore(restored)
	ch.mu.Unlock()
	ch.c.out.method(ch.id, &amqpwire.TxRollbackOK{})
	return nil
}
