package mq

import "github.com/wharf-mq/wharf/internal/amqp/wire"

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
	Args                          wire.Table
}

// QueueDef describes a queue as queue.declare does. Name "" asks for a
// server-named queue ("amq.gen-" and 22 base64url characters). Owner is the
// declaring connection: always set it, passive declares check exclusive
// ownership with it too; the connection owns the queue when Exclusive. An
// exclusive queue is never durable (RabbitMQ 4.x), whatever Durable says.
// Args are stored and compared on redeclaration as RabbitMQ does, but none
// of them (x-message-ttl, x-max-length, x-dead-letter-exchange, x-expires,
// ...) takes effect yet.
type QueueDef struct {
	Name                           string
	Durable, Exclusive, AutoDelete bool
	Args                           wire.Table
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
	Properties           wire.Properties
	// RawProperties are Properties as encoded on the wire (property flags
	// and list, wire.Content.RawProperties), if the caller has them: they
	// are logged as they are and can be forwarded with
	// wire.Writer.WriteContentRaw. nil means "encode Properties".
	RawProperties []byte
	Body          []byte
}

// PublishResult is the outcome of a publish.
type PublishResult struct {
	// Routed is the number of queues the message reached; 0 means
	// unroutable (with mandatory the front end sends basic.return).
	Routed int
	// Durable is nil unless the message is persistent and reached at least
	// one durable queue. It then receives exactly one value once every such
	// copy is covered by an fsync: nil, or the storage error. Fsyncs are
	// shared by all publishers and queues (group commit).
	Durable <-chan error
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
}

// Consumer receives deliveries; the front end's channel implements it.
type Consumer interface {
	// TryDeliver hands a delivery over if the consumer (and its channel)
	// has prefetch credit. It is called with the queue's lock held: it must
	// not block and must not call into this package. false means no credit:
	// the consumer is skipped until its Subscription.Resume is called.
	TryDeliver(d *Delivery) bool
}

// ConsumeSpec is a basic.consume.
type ConsumeSpec struct {
	Tag       string
	NoAck     bool       // deliveries are settled when handed over
	Exclusive bool       // no other consumer may consume from the queue meanwhile
	Args      wire.Table // ignored for now (x-priority is not implemented)
	Conn      ConnID
	Consumer  Consumer
	// Cancelled, if set, is called once (with no lock held) when the queue
	// is deleted while the subscription is active, for consumer_cancel_notify.
	Cancelled func()
}
