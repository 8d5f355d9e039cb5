// Package subjectbridge makes NATS subjects and the AMQP exchange
// amq.topic of vhost "/" one routing space. It belongs to neither core: it
// is a Sink of the subject router (internal/subjects) and an
// ExchangeObserver of the queueing core (internal/mq), and the node
// (internal/node) installs it when the NATS listener is on and either
// needs authentication or binds loopback only (a NATS client with no
// password must not reach AMQP's queues around AMQP's logins and
// permissions). Neither core imports the other or this package.
//
// The model is RabbitMQ's MQTT plugin, which maps MQTT topics onto
// amq.topic of its configured vhost ("/" by default): NATS's
// '.'-separated tokens are AMQP topic words, '*' is '*' and '>' is '#'.
//
//   - NATS to AMQP: for every binding on amq.topic the bridge holds the
//     matching interest in the router (binding key "a.*" is subject
//     pattern "a.*", "a.#" is "a" and "a.>", "#" is ">"; a '#' before the
//     last word is widened to "prefix.>" and the exchange's own matching
//     decides). A NATS message with interest is published to amq.topic,
//     subject as routing key, and reaches exactly the queues an AMQP
//     publish with that routing key would, each once. Bindings added or
//     removed at run time take effect at once.
//   - AMQP to NATS: every message amq.topic routes (published to it, or
//     reaching it through another exchange or as a dead letter) goes to
//     the NATS subscribers of its routing key, queue groups included,
//     when that key is a valid NATS subject (no empty word, no wildcard
//     word, no white space) and the message fits NATS's max_payload.
//   - Loops: each side passes the other only messages it did not get
//     from the bridge (subjects.Message.Source, mq.Message.Origin), so a
//     message crosses once and NATS subscribers get it once.
//
// Message mapping. NATS headers are the AMQP headers table, both ways:
// one value is a string, several an array of strings; the header
// Content-Type is the content_type property. The NATS reply subject is
// reply_to and back, so a request crosses in either direction: an AMQP
// service replies by publishing to amq.topic with reply_to as routing key,
// and an AMQP requester receives a NATS reply in a queue bound to
// amq.topic with its reply_to as binding key. Towards NATS, header values
// are written as text (numbers in decimal, booleans as true/false,
// timestamps in RFC 3339); tables, decimals, nested arrays, values with a
// line break and names that are not printable ASCII without ':' are left
// out, as are other AMQP properties. Towards AMQP, a subject or reply
// subject longer than an AMQP short string (255 bytes) cannot be
// represented, and such a message reaches no queue.
//
// Delivery guarantees are Core NATS's: at most once. A NATS message enters
// AMQP queues as a transient message (delivery mode 1, as the MQTT plugin
// does for QoS 0): a durable classic queue keeps it in memory only (a
// quorum queue logs every message); nothing acknowledges it to the NATS
// publisher. While the queueing core holds more message bytes than the
// AMQP memory high-water mark, NATS messages for AMQP queues are dropped,
// as nats-server drops a slow consumer's, instead of blocking NATS
// publishers. An AMQP message is delivered to the NATS subscribers
// connected at that moment and kept nowhere for them; a persistent
// message's publisher confirm covers its AMQP queues only. A message NATS
// subscribers take counts as routed: a mandatory publish that only they
// receive is not returned, and a NATS request that only an AMQP queue
// receives gets no 503 no-responders (nats-server answers a request whose
// only interest is an MQTT subscription the same way).
//
// Cost: a NATS publish to a subject with no matching binding costs
// nothing more than before (the bridge holds no interest there); an AMQP
// publish to amq.topic costs one router lookup when no NATS subscriber
// matches.
package subjectbridge
