package mq

import (
	"crypto/rand"
	"encoding/base64"
	"strconv"
	"strings"
	"sync"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// Direct reply-to, as RabbitMQ 4.2 has it (its rabbit_volatile_queue): an
// RPC client consumes, in no-ack mode, from the pseudo-queue
// amq.rabbitmq.reply-to and publishes its requests with that reply_to;
// its channel rewrites the property to a name of the consumer's own,
// amq.rabbitmq.reply-to.<node>.<key>, and a reply published to the default
// exchange under that name (as routing key, or in CC or BCC) is handed to
// the consumer at once. No queue is declared, stored, listed or buffered:
// a reply the consumer cannot take (gone, cancelled, its connection's
// writer full) is dropped, at most once as in RabbitMQ. The key is 16
// random bytes, so the name is not guessable: it is what lets a responder
// reach this consumer and no other.
//
// Routing follows RabbitMQ's: a name that names a node of the cluster
// (this one, or another: replyto_cluster.go) counts as a queue the
// message was routed to, whether its consumer is still there or not (no
// basic.return for a mandatory reply; its confirm is an ack at once, as
// nothing is stored). A malformed name, or one of no node, routes
// nowhere. A declare of a name, passive or not, answers 0 messages and 1
// consumer while its consumer is there, else 404; amq.rabbitmq.reply-to
// itself always declares. A name cannot be bound (403), so replies take
// the default exchange only. The names live in their vhost.

// ReplyToQueue is the pseudo-queue a direct reply-to client consumes from
// and names in reply_to.
const ReplyToQueue = "amq.rabbitmq.reply-to"

// replyToPrefix starts every name a reply consumer gets.
const replyToPrefix = ReplyToQueue + "."

// IsReplyTo reports whether name is amq.rabbitmq.reply-to or starts like
// it: no queue can have such a name, and declares of it are answered by
// the reply consumers (queue.declare needs no permission for it, as in
// RabbitMQ).
func IsReplyTo(name string) bool { return strings.HasPrefix(name, ReplyToQueue) }

// checkBindable refuses a reply name as the queue of queue.bind or
// queue.unbind, with RabbitMQ's 403: replies reach their consumer through
// the default exchange only.
func checkBindable(queue string) error {
	if strings.HasPrefix(queue, replyToPrefix) {
		return errAccessRefused("cannot bind or unbind to a volatile (direct reply-to) queue")
	}
	return nil
}

// checkGettable refuses basic.get of a reply name of the cluster's with
// RabbitMQ's 540: replies are handed to their consumer, never held.
func (v *VHost) checkGettable(queue string) error {
	if node, ok := replyNode(queue); ok && (node == v.r.nodeID() || v.r.replyPeer(node)) {
		return amqpwire.Errorf(amqpwire.CodeNotImplemented, "basic.get not supported by volatile %s", resource("queue", queue, v.name))
	}
	return nil
}

// replyConsumers are a vhost's direct reply-to consumers by name.
type replyConsumers struct {
	mu   sync.RWMutex // held for reading across TryDeliver, so none runs after Cancel
	subs map[string]*Subscription
}

// consumeReplies is basic.consume on amq.rabbitmq.reply-to. Only no-ack
// consumers may (406 otherwise, RabbitMQ's text); one per channel is the
// front end's to enforce.
func (v *VHost) consumeReplies(s ConsumeSpec) (*Subscription, error) {
	if !s.NoAck {
		return nil, errPrecondition("reply consumer cannot acknowledge")
	}
	var key [16]byte
	rand.Read(key[:])
	name := replyToPrefix + strconv.Itoa(int(v.r.nodeID())) + "." + base64.RawURLEncoding.EncodeToString(key[:])
	sub := &Subscription{spec: s, replyVH: v, replyTo: name}
	v.replies.mu.Lock()
	if v.replies.subs == nil {
		v.replies.subs = make(map[string]*Subscription)
	}
	v.replies.subs[name] = sub
	v.replies.mu.Unlock()
	return sub, nil
}

// ReplyTo is, for a consumer of amq.rabbitmq.reply-to, the name replies to
// it are published under: what the front end puts in the reply_to of its
// channel's requests. "" for other consumers.
func (s *Subscription) ReplyTo() string { return s.replyTo }

// cancelReplies ends a reply consumer: replies to its name are dropped
// from now on.
func (s *Subscription) cancelReplies() {
	v := s.replyVH
	v.replies.mu.Lock()
	if v.replies.subs[s.replyTo] == s {
		delete(v.replies.subs, s.replyTo)
	}
	v.replies.mu.Unlock()
}

// replyConsumer returns the consumer of a reply name, nil if there is
// none (any more).
func (v *VHost) replyConsumer(name string) *Subscription {
	v.replies.mu.RLock()
	defer v.replies.mu.RUnlock()
	return v.replies.subs[name]
}

// declareReply is queue.declare (passive or not) of a name IsReplyTo
// matches: RabbitMQ answers it as a check that the consumer is there,
// asking its node if that is another (replyto_cluster.go).
func (v *VHost) declareReply(name string) (QueueInfo, error) {
	node, ok := replyNode(name)
	switch {
	case name == ReplyToQueue:
	case ok && node == v.r.nodeID() && v.replyConsumer(name) != nil:
	case ok && v.r.replyPeer(node) && v.replyExistsThere(node, name):
	default:
		return QueueInfo{}, errNotFound("queue", name, v.name)
	}
	return QueueInfo{Name: name, Consumers: 1}, nil
}

// deliverReplies hands m, published to the default exchange, to the reply
// consumers its routing keys name, here or, forwarded, on their nodes
// (replyto_cluster.go), and returns how many names of the cluster's nodes
// they hold (each counted once): those m was routed to, taken or not. No
// lock of the vhost may be held.
func (v *VHost) deliverReplies(m *Message, keys []string) int {
	routed := 0
	for i, k := range keys {
		node, ok := replyNode(k)
		if !ok || containsBefore(keys, i) {
			continue
		}
		switch {
		case node == v.r.nodeID():
			v.deliverReply(k, m)
		case v.r.replyPeer(node):
			v.forwardReply(node, k, m)
		default:
			continue // no node's: routes nowhere
		}
		routed++
	}
	return routed
}

// deliverReply hands m to the reply consumer of name, if it is here; one
// that refuses it drops it, as it cannot wait anywhere.
func (v *VHost) deliverReply(name string, m *Message) {
	v.replies.mu.RLock()
	defer v.replies.mu.RUnlock()
	if s := v.replies.subs[name]; s != nil {
		s.spec.Consumer.TryDeliver(&Delivery{Queue: name, Message: m})
	}
}

// containsBefore reports whether keys[i] is among keys[:i].
func containsBefore(keys []string, i int) bool {
	for _, k := range keys[:i] {
		if k == keys[i] {
			return true
		}
	}
	return false
}
