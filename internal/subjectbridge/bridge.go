package subjectbridge

import (
	"bytes"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/mq"
	"github.com/wharf-mq/wharf/internal/subjects"
)

// The exchange and vhost NATS subjects share, RabbitMQ's MQTT plugin's
// defaults.
const (
	exchange = "amq.topic"
	vhost    = mq.DefaultVHost
)

// interestGroup is the queue group of the bridge's subscriptions, so that
// a subject matching several of them (orders.* and *.eu for orders.eu)
// reaches the bridge once. A NATS client cannot join it: a SUB's queue
// group is one token, and this name has a space.
const interestGroup = "wharf amq.topic"

// Config tunes the bridge.
type Config struct {
	// MaxPayload is NATS's max_payload: an AMQP message larger than it
	// (header block and body) is not passed to NATS subscribers, as
	// nats-server would not have taken it from a NATS publisher. <= 0:
	// no limit.
	MaxPayload int
	// MemoryLimit is the AMQP memory high-water mark: while the queueing
	// core holds more message bytes (mq.Registry.MemoryUsed), NATS
	// messages for AMQP queues are dropped. <= 0: no limit.
	MemoryLimit int64
	Logger      *slog.Logger // nil: discard
}

// Bridge joins a subject router and amq.topic of vhost "/": it is the
// router's Sink for the interest of amq.topic's bindings, and the
// exchange's observer.
type Bridge struct {
	router *subjects.Router
	queues *mq.Registry
	vhost  *mq.VHost
	cfg    Config
	log    *slog.Logger

	mu       sync.Mutex
	interest map[string]*patternInterest // by subject pattern

	// dropping is set while NATS messages are dropped for memory, so
	// that the log says when that starts and ends, not for each one.
	dropping atomic.Bool
}

// patternInterest is one subscription of the bridge and how many
// binding keys need it.
type patternInterest struct {
	sub  *subjects.Subscription
	keys int
}

// Install joins router and amq.topic of queues' vhost "/". The bridge has
// no goroutine and nothing to close: it lives as long as both.
func Install(router *subjects.Router, queues *mq.Registry, cfg Config) error {
	v, err := queues.VHost(vhost)
	if err != nil {
		return err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := &Bridge{
		router:   router,
		queues:   queues,
		vhost:    v,
		cfg:      cfg,
		log:      log.With("component", "subjectbridge"),
		interest: make(map[string]*patternInterest),
	}
	return v.ObserveExchange(exchange, b)
}

// BindingAdded subscribes the subject patterns of a new binding key that
// no other key needed yet.
func (b *Bridge) BindingAdded(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range subjectPatterns(key) {
		if in := b.interest[p]; in != nil {
			in.keys++
			continue
		}
		sub, err := b.router.Subscribe(p, interestGroup, b)
		if err != nil { // subjectPatterns gives valid patterns only
			b.log.Error("subscribing a binding's subjects", "key", key, "pattern", p, "err", err)
			continue
		}
		b.interest[p] = &patternInterest{sub: sub, keys: 1}
	}
}

// BindingRemoved unsubscribes the subject patterns no binding key needs
// any more.
func (b *Bridge) BindingRemoved(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range subjectPatterns(key) {
		in := b.interest[p]
		if in == nil {
			continue
		}
		if in.keys--; in.keys == 0 {
			b.router.Unsubscribe(in.sub)
			delete(b.interest, p)
		}
	}
}

// Deliver publishes a NATS message to amq.topic, subject as routing key,
// and reports whether it reached a queue. Messages the bridge passed to
// NATS itself are refused: they came from amq.topic.
func (b *Bridge) Deliver(m *subjects.Message) bool {
	if m.Source == b {
		return false
	}
	if b.overMemory() {
		return true // interest there was: no 503 for it, as for a slow consumer's
	}
	msg, ok := amqpMessage(m)
	if !ok {
		return false
	}
	msg.Origin = b
	// A failed queue's error is logged by mq, after the other queues got
	// the message; what was routed was routed.
	res, _ := b.vhost.Publish(msg)
	return res.Routed > 0
}

// overMemory reports whether NATS messages are to be dropped for memory
// now, and logs when that starts and stops.
func (b *Bridge) overMemory() bool {
	if b.cfg.MemoryLimit <= 0 {
		return false
	}
	over := b.queues.MemoryUsed() >= b.cfg.MemoryLimit
	if b.dropping.Load() != over && b.dropping.CompareAndSwap(!over, over) {
		if over {
			b.log.Warn("memory high-water mark reached: dropping NATS messages for AMQP queues", "limit", b.cfg.MemoryLimit)
		} else {
			b.log.Info("memory below the high-water mark: NATS messages reach AMQP queues again")
		}
	}
	return over
}

// onlyOwnInterest reports whether the bridge's own subscriptions, which
// hold amq.topic's bindings in the router, are all that matched: then no
// NATS client wants the message, and it need not be turned into one only
// for Deliver to hand it back.
func (b *Bridge) onlyOwnInterest(res *subjects.Result) bool {
	return len(res.Plain) == 0 && len(res.Queues) == 1 && res.Queues[0][0].Sink() == subjects.Sink(b)
}

// amqpMessage is m as an AMQP publish to amq.topic, copied (m's slices
// are the publisher's), or false if its subject or reply subject is too
// long for AMQP.
func amqpMessage(m *subjects.Message) (*mq.Message, bool) {
	if len(m.Subject) > maxShortString || len(m.Reply) > maxShortString {
		return nil, false
	}
	var props amqpwire.Properties
	props.ReplyTo = string(m.Reply)
	if m.Header != nil {
		props.Headers, props.ContentType = fromNATSHeader(m.Header)
	}
	return &mq.Message{Exchange: exchange, RoutingKey: string(m.Subject), Properties: props, Body: bytes.Clone(m.Payload)}, true
}

// Route passes a message amq.topic routes to the NATS subscribers of its
// routing key and reports whether any took it.
func (b *Bridge) Route(m *mq.Message) bool {
	if !subjects.ValidLiteral(m.RoutingKey) {
		return false
	}
	subject := []byte(m.RoutingKey)
	res := b.router.Match(subject)
	if res.Empty() || b.onlyOwnInterest(res) {
		return false
	}
	header := natsHeader(&m.Properties)
	if b.cfg.MaxPayload > 0 && len(header)+len(m.Body) > b.cfg.MaxPayload {
		return false
	}
	out := &subjects.Message{Subject: subject, Header: header, Payload: m.Body, Source: b}
	if subjects.ValidLiteral(m.Properties.ReplyTo) {
		out.Reply = []byte(m.Properties.ReplyTo)
	}
	return res.Deliver(out)
}
