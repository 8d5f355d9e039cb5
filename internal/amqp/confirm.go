package amqp

import (
	"sync"

	"github.com/wharf-mq/wharf/internal/amqp/wire"
)

// confirmSelect puts the channel in confirm mode. RabbitMQ refuses it on a
// transactional channel with 406.
func (ch *channel) confirmSelect(m *wire.ConfirmSelect) error {
	if ch.tx != nil {
		return wire.Errorf(wire.CodePreconditionFailed, "cannot switch from tx to confirm mode").In(m.ID())
	}
	if ch.confirm == nil {
		ch.confirm = newConfirmer(ch)
	}
	ch.reply(m.NoWait, &wire.ConfirmSelectOK{})
	return nil
}

// confirmer numbers a confirm-mode channel's publishes and reports each as
// basic.ack or basic.nack, strictly in publish order. Emitting in order
// lets every ack be multiple=true, so the writer merges consecutive acks
// into one frame. A publish that needs no fsync (transient, unroutable, or
// only non-durable queues) is confirmed inline when nothing is waiting
// ahead of it; otherwise the channel's confirm goroutine waits for the
// fsyncs in order.
type confirmer struct {
	ch *channel

	mu      sync.Mutex
	seq     uint64           // last sequence number assigned
	waiting []pendingConfirm // publishes not yet confirmed, in order
	busy    bool             // the goroutine holds one popped from waiting
	running bool             // the goroutine has been started
	stopped bool

	wake chan struct{}
	done chan struct{} // closed by stop
}

type pendingConfirm struct {
	seq     uint64
	durable <-chan error // nil: nothing to wait for
	failed  bool         // nack regardless
}

func newConfirmer(ch *channel) *confirmer {
	return &confirmer{ch: ch, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// published records the next publish. durable, if non-nil, yields the
// result of the fsync the confirm must wait for; failed means nack.
func (cf *confirmer) published(durable <-chan error, failed bool) {
	cf.mu.Lock()
	cf.seq++
	if durable == nil && len(cf.waiting) == 0 && !cf.busy {
		cf.emitLocked(cf.seq, !failed)
		cf.mu.Unlock()
		return
	}
	cf.waiting = append(cf.waiting, pendingConfirm{seq: cf.seq, durable: durable, failed: failed})
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

// emitLocked queues the confirm of seq. cf.mu must be held, which keeps
// the inline path and the goroutine in order.
func (cf *confirmer) emitLocked(seq uint64, ok bool) {
	out := cf.ch.c.out
	if ok {
		out.ack(cf.ch.id, seq)
	} else {
		out.push(outItem{kind: outNack, channel: cf.ch.id, tag: seq})
	}
}

// run is the confirm goroutine: it takes waiting publishes in order, waits
// for each one's fsync and emits its confirm. It ends when the channel
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
		p := cf.waiting[0]
		cf.waiting[0] = pendingConfirm{}
		cf.waiting = cf.waiting[1:]
		cf.busy = true
		cf.mu.Unlock()

		ok := !p.failed
		if p.durable != nil {
			select {
			case err := <-p.durable:
				ok = ok && err == nil
				if err != nil {
					cf.ch.c.log.Warn("persisting a confirmed publish failed; sending nack", "seq", p.seq, "err", err)
				}
			case <-cf.done:
				return
			}
		}
		cf.mu.Lock()
		cf.emitLocked(p.seq, ok)
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
