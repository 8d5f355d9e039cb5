// Package mq is Wharf's queueing core: message queuing with AMQP 0-9-1
// semantics as RabbitMQ 4.x has them: virtual hosts, exchanges, bindings and
// queues; routing, dispatch to consumers, settlement; durable queues on
// their stores (internal/queuestore). It knows nothing of frames or
// sockets: internal/amqp (and the management API, internal/httpapi) turn
// requests into calls here. It does not know the Kafka core either: stream
// queues reach Kafka topics through Config.Streams.
//
// # Model
//
// A Registry holds virtual hosts; a VHost holds exchanges and queues. Every
// vhost has the default exchange "" (every queue is reachable by its name,
// it cannot be bound, unbound or deleted) and amq.direct, amq.fanout,
// amq.topic, amq.headers and amq.match. Exchange matching lives in the pure
// subpackage internal/mq/routing. An ExchangeObserver (observer.go) shares
// an exchange's routing with another protocol: the node puts NATS
// subjects and amq.topic of vhost "/" in one routing space through one.
// Direct reply-to (amq.rabbitmq.reply-to, replyto.go) is routing to a
// consumer with no queue: replies reach it through the default exchange.
//
// Durable exchanges, queues and bindings (a binding is durable when both of
// its ends are) are written to the DefinitionStore before the call returns
// and come back at Open. In a cluster (Config.Cluster) the store is
// the replicated metadata log and every node follows it as it commits;
// durable classic queues live on the node that declared them (cluster.go)
// and other nodes reach them there (classic_remote.go), and
// quorum queues are replicated by a Raft group each and served on its
// leader (quorum_cluster.go, internal/quorumstore; placement, grow and
// shrink in quorum_members.go), which every other
// node reaches through calls: their clients publish, consume and get
// there as on the leader (quorum_calls.go, quorum_proxy.go,
// quorum_session.go). They are stored as JSON text, so names (and
// routing keys of bindings) must be valid UTF-8: others are refused with
// RabbitMQ's 501 FRAME_ERROR "Malformed UTF-8 in shortstr". The
// management API's figures of a queue come from the node serving it, one
// call per node for a listing (queue_stats_cluster.go).
//
// # Queues and storage
//
// A queue holds messages in FIFO order: ready ones, and unacknowledged ones
// handed to a consumer or basic.get. A durable queue also has a store
// (storage.go: the queueStore interface, implemented by
// internal/queuestore): a messages log with one record per persistent
// message (every message of a quorum queue) and a settlement log, in
// DataDir/queues/<id>/, created on first use. Transient messages, and every
// message of a non-durable queue, live in memory only. The queue tells its
// store every change to a logged message's fate (enqueued, delivered,
// settled, returned), and after a restart a durable queue holds exactly
// its logged messages that were not settled, in order, with their
// delivery counts; settlements are written in batches, so a crash may
// deliver the latest settled messages again. Queue directories that no
// durable queue's definition names are moved aside at Open, never deleted.
//
// A queue whose logs cannot be opened or read back, or that the stores'
// scrubber (at Open, and at Config.ScrubInterval) finds damaged, crashes
// alone (crash.go): it keeps its definition and files, answers 404 "has
// crashed and failed to restart" (RabbitMQ's text) and refuses messages
// routed to it; the node and the other queues serve.
//
// Bodies of persistent messages are kept in memory while a queue is short
// (Config.QueueMemoryBytes); beyond that they stay on disk only and are read
// back from the log, a batch of messages at a time, when they near the head.
//
// # Queue features
//
// Queue arguments take effect as in RabbitMQ 4.x, and so do policies
// (policy.go: VHost.SetPolicy; stored with the definitions, applied at
// once to existing queues and exchanges): dead-lettering with x-death (deadletter.go), message TTL
// and x-expires, length limits with the three x-overflow modes, message
// priorities (x-max-priority), consumer priorities (x-priority),
// single active consumer, quorum queues on one node (durable only,
// delivery limit and x-delivery-count, every message logged) and the
// consumer timeout (TimeoutNotifier). Only the heads of a queue expire,
// as in RabbitMQ; a timer goroutine per Registry (timers.go) expires them
// without traffic, deletes unused queues and watches consumer timeouts.
// Arguments are checked as RabbitMQ 4.1 checks them (queue_args.go).
//
// What survives a restart of a durable queue: enqueue times (the batch
// timestamp of each logged message), so TTLs keep counting from the
// publish; quorum delivery counts (records in the settlement log, written
// with the settlements, so a crash may lose the latest increments as it
// may lose the latest settlements). A queue that needs every message's
// priority, size or enqueue time (x-max-priority, quorum, x-max-length-
// bytes, x-message-ttl) reads its messages log through once at Open;
// others learn a recovered message's own expiration when they read it.
// x-expires counts from the restart.
//
// # Stream queues
//
// A stream queue (x-queue-type stream, stream.go) is a Kafka topic of one
// partition that the Kafka core owns, reached through Config.Streams (the
// node passes internal/streambridge's): the queue "orders" of vhost "/"
// is the topic "orders" (StreamTopicName).
// Publishing appends one record per message (stream_codec.go: properties
// and headers become Kafka record headers and back), consecutive messages
// of a Publisher in one record batch, so Kafka clients read and write the
// same log. Consumers (stream_consume.go) need a
// consumer prefetch, start where x-stream-offset says (first, last, next,
// an offset, a timestamp or an interval) and are fed by a reader goroutine
// each; acks only return credit; basic.get and queue.purge are 540, as in
// RabbitMQ. Retention is the topic's, from x-max-age, x-max-length-bytes
// and x-stream-max-segment-size-bytes. Deleting the queue (or its vhost)
// deletes the topic.
//
// # Publisher confirms
//
// Appends of persistent messages do not wait for fsync. The registry's
// syncer (replica.Syncer) collects waiting confirms, fsyncs each dirty
// log once per round (group commit across publishers, queue stores and
// stream topics) and then completes every confirm the round covered. It
// fails closed: a log whose fsync failed, or that was closed before its
// messages were made durable, fails the confirms (nacks); only a deleted
// queue's messages are confirmed without an fsync, as RabbitMQ confirms
// them.
//
// A front end publishes through a Publisher (publisher.go), one per
// connection, which batches: stream records are held back and appended as
// one record batch per stream at Flush, and the confirms of all messages
// of a flush share one commit (commit.go), registered once with the
// syncer, so they cost one wait and can be answered with one multiple ack.
// The front end flushes whenever its reader would otherwise wait. A
// Publisher's persistent messages to durable queues are enqueued at once,
// their offsets known, but their log records are held back in the queue's
// store (queue.logLocked) and written as one append per queue,
// right before the fsync, so a fanout to many queues costs no write per
// message and queue on the reader's path.
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
//     ErrClosed after Registry.Close. A crashed queue's errors are 404s, on
//     the channel; 541 INTERNAL_ERROR is left to storage failures that are
//     not a queue's damaged data.
//   - Publish, Ack, Discard, Requeue, Get, Subscription.Resume and
//     Subscription.Cancel may dispatch to any consumer (TryDeliver) and
//     dead-letter into other queues: call them with no lock held that a
//     TryDeliver takes.
//   - PublishResult.Rejected > 0 means nack in confirm mode; a
//     TimeoutNotifier consumer closes its channel with 406 when told.
//
// Lock order inside: VHost.defMu (definition changes, held across
// DefinitionStore writes), VHost.mu (maps and bindings; publishers hold it
// for reading while routing), the store's own lock (queuestore.Store),
// queue.mu, timers.mu. Dead
// letters are published after the dying queue's lock is released
// (queue.unlock), never under it.
package mq
