// Package mq is Wharf's broker core for message queuing with AMQP 0-9-1
// semantics as RabbitMQ 4.x has them: virtual hosts, exchanges, bindings and
// queues; routing, dispatch to consumers, settlement; durable queues on the
// segmented log. It knows nothing of frames or sockets: internal/amqp turns
// AMQP methods into calls here.
//
// # Model
//
// A Registry holds virtual hosts; a VHost holds exchanges and queues. Every
// vhost has the default exchange "" (every queue is reachable by its name,
// it cannot be bound, unbound or deleted) and amq.direct, amq.fanout,
// amq.topic, amq.headers and amq.match. Exchange matching lives in the pure
// subpackage internal/mq/routing.
//
// Durable exchanges, queues and bindings (a binding is durable when both of
// its ends are) are written to the DefinitionStore before the call returns
// and come back at Open.
//
// # Queues and storage
//
// A queue holds messages in FIFO order: ready ones, and unacknowledged ones
// handed to a consumer or basic.get. A durable queue also owns two seglog
// logs in DataDir/queues/<id>/: "messages", one record per persistent
// message (value = body; headers carry exchange, routing key and encoded
// properties), and "settled", records naming settled message offsets.
// Transient messages, and every message of a non-durable queue, live in
// memory only. After a restart a durable queue holds exactly its logged
// messages that were not settled, in order. A housekeeper goroutine writes
// settlements in batches (every Config.HousekeepingInterval, or sooner when
// many are pending: a crash loses at most those, which are then delivered
// again), deletes messages-log segments once every message in them is
// settled, and compacts the settlement log.
//
// Bodies of persistent messages are kept in memory while a queue is short
// (Config.QueueMemoryBytes); beyond that they stay on disk only and are read
// back from the log, a batch of messages at a time, when they near the head.
//
// # Publisher confirms
//
// Appends of persistent messages do not wait for fsync. One syncer goroutine
// per Registry collects waiting confirms, fsyncs each dirty log once per
// round (group commit across publishers and queues) and then completes
// every confirm the round covered.
//
// # Contract with the front end
//
//   - Consumer.TryDeliver runs with the queue's lock held: it must not block
//     and must not call into this package (not even Subscription.Resume).
//     A false return pauses the consumer until Subscription.Resume.
//   - A new Subscription is paused: call Resume after basic.consume-ok is
//     written, so no basic.deliver can overtake it.
//   - ConsumeSpec.Cancelled runs with no lock held, once, when the queue is
//     deleted (also for a deleted vhost, or an exclusive queue deleted by
//     ConnectionClosed).
//   - Delivered Messages are shared and read-only; a published Message must
//     not be modified afterwards.
//   - Errors are *Error (= *wire.Error) with RabbitMQ's codes and texts, or
//     ErrClosed after Registry.Close.
//
// Lock order inside: VHost.defMu (definition changes, held across
// DefinitionStore writes), VHost.mu (maps and bindings; publishers hold it
// for reading while routing), queueStore.mu, queue.mu.
package mq
