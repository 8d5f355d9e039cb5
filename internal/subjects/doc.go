// Package subjects is Wharf's subject routing core: NATS subjects, their
// validation, and a Router that matches a published subject against the
// subscriptions' patterns. It does no I/O and knows no wire protocol:
// internal/nats turns SUB, UNSUB and PUB into calls here.
//
// A subject is a string of tokens separated by '.', e.g. "orders.eu.new".
// A subscription pattern may use two wildcards, each a whole token: '*'
// matches any one token, '>' (last token only) matches one or more tokens.
// Subscriptions with a queue group name share the messages of their
// group: each message goes to one member of every group and to every
// subscription without a group. A sink that subscribes several patterns
// and wants each message once, however many of them match, subscribes
// them in one group of its own (internal/subjectbridge does, under a name
// with a space, which no NATS client can give).
//
// Delivery goes through the Sink interface, so a subscriber need not be a
// NATS connection: anything that can take a Message (an AMQP queue bound
// to a topic exchange, say) can hold interest in the same routing space.
//
// Matching costs a walk of the subscription tree under a read lock; a
// publisher that sends many messages keeps a Cache of its recent results,
// which Router invalidates as a whole whenever a subscription is added or
// removed (the Router's generation number changes).
package subjects
