// Package routing decides which bindings of one exchange match a message,
// following RabbitMQ 4.x: direct (routing key equals binding key), fanout
// (every binding), topic ('*' one word, '#' zero or more words, words split
// on '.'), headers (x-match all / any / all-with-x / any-with-x) and the
// x-consistent-hash type of RabbitMQ's plugin (binding key = weight; one
// destination per message, chosen by hashing its routing key, a header or
// a property).
//
// It is pure: it knows nothing of queues, vhosts or storage. A Table holds
// the bindings whose source is one exchange; the destination type is the
// caller's (internal/mq uses a small struct naming a queue or an exchange).
// Tables are not safe for concurrent mutation; the caller locks.
package routing
