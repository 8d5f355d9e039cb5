package mq

import (
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/quorumstore"
)

// ConnID identifies a client connection (the owner of exclusive queues).
type ConnID uint64

// QueueTag identifies one message in one queue while it is unsettled. Tags
// are unique across the whole Registry for its lifetime (never reused, not
// even by a queue of the same name declared later), so a stale tag settles
// nothing. They are not log offsets and do not survive a restart.
type QueueTag uint64

// ExchangeDef describes an exchange as exchange.declare does. Type is
// direct, fanout, topic or headers; Args may carry "alternate-exchange".
type ExchangeDef struct {
	Name, Type                    string
	Durable, AutoDelete, Internal bool
	Args                          amqpwire.Table
}

// QueueDef describes a queue as queue.declare does. Name "" asks for a
// server-named queue ("amq.gen-" and 22 base64url characters). Owner is the
// declaring connection: always set it, passive declares check exclusive
// ownership with it too; the connection owns the queue when Exclusive. An
// exclusive queue is never durable (RabbitMQ 4.x), whatever Durable says.
//
// Args are checked, stored and compared on redeclaration as RabbitMQ 4.1
// does, and take effect: x-queue-type (classic, quorum or stream; a stream
// queue is a Kafka topic, see StreamStore, and takes only x-max-age,
// x-max-length-bytes and x-stream-max-segment-size-bytes), x-message-ttl,
// x-expires, x-max-length, x-max-length-bytes, x-overflow (drop-head,
// reject-publish, reject-publish-dlx), x-dead-letter-exchange,
// x-dead-letter-routing-key, x-max-priority (classic), x-single-active-
// consumer, x-delivery-limit (quorum, default 20) and x-consumer-timeout
// (ms). A policy (VHost.SetPolicy) may supply or lower these settings.
type QueueDef struct {
	Name                           string
	Durable, Exclusive, AutoDelete bool
	Args                           amqpwire.Table
	Owner                          ConnID
}

// QueueInfo is what queue.declare-ok reports: Messages counts ready
// messages (not those delivered and unacknowledged).
type QueueInfo struct {
	Name                string
	Messages, Consumers int
}

// Message is a published message. Persistent when Properties.DeliveryMode
// is 2. The registry keeps the pointer (and Body) without copying: callers
// must not modify a Message after publishing it, and must treat delivered
// Messages as read-only (one Message may be delivered from several queues).
type Message struct {
	Exchange, RoutingKey string
	Properties           amqpwire.Properties
	// RawProperties are Properties as encoded on the wire (property flags
	// and list, amqpwire.Content.RawProperties), if the caller has them: they
	// are logged as they are and can be forwarded with
	// amqpwire.Writer.WriteContentRaw. nil means "encode Properties".
	RawProperties []byte
	Body          []byte
	// Origin is the ExchangeObserver that published the message (a
	// bridge from another protocol), which is not given it back; nil
	// for a message from a client. It is not stored.
	Origin ExchangeObserver
}

// PublishResult is the outcome of a publish.
type PublishResult struct {
	// Routed is the number of queues the message reached, plus one if
	// subscribers of another protocol took it (ExchangeObserver), plus
	// the direct reply-to names of this node it was published to
	// (replyto.go); 0 means unroutable (with mandatory the front end
	// sends basic.return).
	Routed int
	// Durable is pending (Durability.Pending) if the message was logged:
	// persistent and reached at least one durable queue, or reached a
	// quorum or stream queue. Its Done channel is then closed once every
	// such copy is covered by an fsync, and Err says whether it is
	// durable. Fsyncs are shared by all publishers and queues (group
	// commit).
	Durable Durability
	// Rejected is how many of the Routed queues refused the message
	// because they were full with x-overflow reject-publish or
	// reject-publish-dlx. In confirm mode the front end must answer the
	// publish with basic.nack when Rejected > 0 (after Durable, if set),
	// as RabbitMQ does; a refused message was routed, so mandatory does
	// not return it.
	Rejected int
	// Backlog is the largest number of ready messages (not yet delivered)
	// left in any of the queues the message went to, just after it was
	// added: what the front end's publisher flow control looks at.
	Backlog int
}

// Delivery is one message handed to a consumer or returned by Get.
type Delivery struct {
	Queue       string
	Tag         QueueTag // settle with Ack / Requeue / Discard on Queue
	Redelivered bool
	Message     *Message
	// MessageCount is, for Get, the number of ready messages left
	// (basic.get-ok's message-count); 0 for consumer deliveries.
	MessageCount int
	// handout is, for a quorum queue of the cluster, the commit the
	// delivery waits on before it leaves the leader (handOverLocked sets
	// it, under the queue's lock).
	handout quorumstore.Handout
}

// Consumer receives deliveries; the front end's channel implements it.
type Consumer interface {
	// TryDeliver hands a delivery over if the consumer (and its channel)
	// has prefetch credit. It is called with the queue's lock held: it must
	// not block and must not call into this package. false means no credit:
	// the consumer is skipped until its Subscription.Resume is called.
	// A stream queue's consumer is called from its subscription's reader
	// goroutine instead (never two calls at once, none after Cancel
	// returns), under the same rules.
	TryDeliver(d *Delivery) bool
}

// TimeoutNotifier is implemented by a Consumer that wants to hear of its
// deliveries left unacknowledged past the consumer timeout
// (Config.ConsumerTimeout, or the queue's x-consumer-timeout). RabbitMQ
// then closes the consumer's channel with 406 PRECONDITION_FAILED
// "delivery acknowledgement on channel N timed out. Timeout value used: T
// ms. This timeout value can be configured, see consumers doc guide to
// learn more", which requeues the channel's unacknowledged messages: the
// front end does exactly that. This package neither closes nor requeues
// anything by itself.
//
// DeliveryTimedOut is called from the registry's timer goroutine with no
// lock held (it may call into this package, but should not block for
// long), at most once per delivery, and at most once per consumer and
// queue in one pass, naming its oldest timed-out delivery. Deliveries to
// consumers that do not implement it, and basic.get deliveries, are not
// watched.
type TimeoutNotifier interface {
	DeliveryTimedOut(tag QueueTag, timeout time.Duration)
}

// ConsumeSpec is a basic.consume.
type ConsumeSpec struct {
	Tag       string
	NoAck     bool           // deliveries are settled when handed over
	Exclusive bool           // no other consumer may consume from the queue meanwhile
	Args      amqpwire.Table // x-priority (integer, default 0): consumer priority
	Conn      ConnID
	Consumer  Consumer
	// Prefetch is the consumer's prefetch limit (basic.qos global=false
	// before basic.consume; 0 none) and GlobalPrefetch the channel's
	// (global=true). The front end enforces both; this package only
	// checks them where RabbitMQ does: a stream queue requires a
	// consumer prefetch and refuses a global one.
	Prefetch, GlobalPrefetch int
	// Cancelled, if set, is called once (with no lock held) when the queue
	// is deleted while the subscription is active, for consumer_cancel_notify.
	Cancelled func()
}
