package amqp

import (
	"errors"
	"sync"

	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/mq"
)

// confirmSelect puts the channel in confirm mode. RabbitMQ refuses it on a
// transactional channel with 406.
func (ch *channel) confirmSelect(m *amqpwire.ConfirmSelect) error {
	if ch.tx != nil {
		return amqpwire.Errorf(amqpwire.CodePreconditionFailed, "cannot switch from tx to confirm mode").In(m.ID())
	}
	if ch.confirm == nil {
		ch.mu.Lock()
		ch.confirm = newConfirmer(ch)
		ch.mu.Unlock()
	}
	ch.reply(m.NoWait, &amqpwire.ConfirmSelectOK{})
	return nil
}

// confirmer numbers a confirm-mode channel's publishes and reports each as
// basic.ack or basic.nack, strictly in publish order. Emitting in order
// lets every ack be multiple=true, so the writer merges consecutive acks
// into one frame. A publish that needs no fsync (transient, unroutable, or
// only non-durable queues) is confirmed inline when nothing is waiting
// ahead of it; otherwise the channel's confirm goroutine waits for the
// fsyncs in order.
//
// Publishes are kept as runs rather than one by one: the messages a
// connection's mq.Publisher flushes together share one commit, so a run
// of them costs one wait and one ack however long it is.
type confirmer struct {
	ch *channel

	mu      sync.Mutex
	seq     uint64       // last sequence number assigned
	settled uint64       // last sequence number acked or nacked
	waiting []confirmRun // publishes not yet confirmed, in order
	busy    bool         // the goroutine holds one popped from waiting
	running bool         // the goroutine has been started
	stopped bool

	wake chan struct{}
	done chan struct{} // closed by stop
}

// confirmRun is a run of consecutive publishes confirmed together: all
// waiting for nothing, or their Durabilities one commit's consecutive
// messages (mq.Durability.Follows).
type confirmRun struct {
	first, last uint64        // sequence numbers
	from, to    mq.Durability // of first and last
	failed      bool          // nack them regardless
}

func newConfirmer(ch *channel) *confirmer {
	return &confirmer{ch: ch, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// published records the next publish. durable says what fsync its
// confirm waits for; failed means nack.
func (cf *confirmer) published(durable mq.Durability, failed bool) {
	cf.mu.Lock()
	cf.seq++
	pending := durable.Pending()
	if !pending && len(cf.waiting) == 0 && !cf.busy {
		cf.emitLocked(confirmRun{first: cf.seq, last: cf.seq, failed: failed})
		cf.mu.Unlock()
		return
	}
	if n := len(cf.waiting); n > 0 {
		r := &cf.waiting[n-1]
		if r.failed == failed && (pending && durable.Follows(r.to) || !pending && !r.to.Pending()) {
			r.last, r.to = cf.seq, durable
			cf.mu.Unlock()
			return // the goroutine has not taken r yet: it will see the whole run
		}
	}
	cf.waiting = append(cf.waiting, confirmRun{first: cf.seq, last: cf.seq, from: durable, to: durable, failed: failed})
	start := !cf.running && !cf.stopped
	cf.running = cf.running || start
	cf.mu.Unlock()
	if start {
		c := cf.ch.c
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			cf.run()
		}()
	}
	select {
	case cf.wake <- struct{}{}:
	default:
	}
}

// emitLocked queues the confirms of run r, whose fsync (if any) is done.
// cf.mu must be held, which keeps the inline path and the goroutine in
// order.
func (cf *confirmer) emitLocked(r confirmRun) {
	cf.settled = r.last
	out := cf.ch.c.out
	if r.failed {
		for seq := r.first; seq <= r.last; seq++ {
			out.push(outItem{kind: outNack, channel: cf.ch.id, tag: seq})
		}
		return
	}
	next := r.first // the first not yet confirmed
	nacked := uint64(0)
	var storageErr error
	r.from.RunErrs(r.to, func(pos int, err error) {
		nacked++
		seq := r.first + uint64(pos)
		if seq > next {
			out.ack(cf.ch.id, seq-1)
		}
		// A message a stream refused was logged by mq when refused.
		if !errors.Is(err, mq.ErrStreamRefused) && storageErr == nil {
			storageErr = err
		}
		out.push(outItem{kind: outNack, channel: cf.ch.id, tag: seq})
		next = seq + 1
	})
	if next <= r.last {
		out.ack(cf.ch.id, r.last)
	}
	cf.ch.stats.add(statConfirm, r.last-r.first+1-nacked)
	if storageErr != nil {
		cf.ch.c.log.Warn("persisting confirmed publishes failed; sending nacks", "first", r.first, "last", r.last, "err", storageErr)
	}
}

// unconfirmed is how many publishes await their confirm.
func (cf *confirmer) unconfirmed() int {
	cf.mu.Lock()
	defer cf.mu.Unlock()
	return int(cf.seq - cf.settled)
}

// run is the confirm goroutine: it takes waiting runs in order, waits for
// each one's fsync and emits its confirms. It ends when the channel
// closes.
func (cf *confirmer) run() {
	for {
		cf.mu.Lock()
		if len(cf.waiting) == 0 {
			cf.mu.Unlock()
			select {
			case <-cf.wake:
				continue
			case <-cf.done:
				return
			}
		}
		r := cf.waiting[0]
		cf.waiting[0] = confirmRun{}
		cf.waiting = cf.waiting[1:]
		cf.busy = true
		cf.mu.Unlock()

		if r.from.Pending() {
			select {
			case <-r.from.Done():
			case <-cf.done:
				return
			}
		}
		cf.mu.Lock()
		cf.emitLocked(r)
		cf.busy = false
		cf.mu.Unlock()
	}
}

// stop ends the confirm goroutine; confirms still pending are dropped with
// the channel.
func (cf *confirmer) stop() {
	cf.mu.Lock()
	defer cf.mu.Unlock()
	if !cf.stopped {
		cf.stopped = true
		close(cf.done)
	}
}
