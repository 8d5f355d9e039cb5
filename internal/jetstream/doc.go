// Package jetstream is Wharf's JetStream core: streams and their consumers
// with nats-server 2.15's semantics, errors included (codes and texts of
// its errors.json). It speaks no wire protocol: internal/nats turns the
// $JS.API.> requests, the acknowledgements on $JS.ACK.> and the messages
// published to streams' subjects into calls here, and routes what the
// core delivers (it is the core's Outbox).
//
// # Storage
//
// Everything lives on logs through the log seam (internal/replica), so it
// replicates when they do:
//
//   - A stream is one log, which the node keeps as the Kafka topic
//     "js.<stream>" of one partition (TopicName): a message is one record
//     whose key is its subject, whose headers are its NATS header fields
//     and whose value is its payload; its sequence is its offset + 1. A
//     Kafka consumer reads a stream there, and records a Kafka producer
//     appends there become messages of the stream (indexed at the next
//     publish, or within a second). Stream names are limited to ASCII
//     letters, digits, '-' and '_' so that every stream has a legal topic
//     name; Kafka's collision rule ('.' and '_' equated) refuses a topic
//     that would clash with a stream's, and the stream of a topic that
//     exists.
//   - Stream and consumer definitions are records of the metadata log
//     (Definitions, under "jetstream/").
//   - What changes with every acknowledgement is in a compacted state log
//     of its own (stateLog): each consumer's position, pending deliveries
//     and delivery counts, and each stream's head and explicit deletions,
//     keyed by an id of their incarnation. The state is written every
//     100 ms (Config.StateFlushInterval) and at close; a crash loses at
//     most that much of acknowledgements, whose messages are delivered
//     again (at least once, as in nats-server). It is written only once
//     the stream's log has committed every message it names, so that no
//     sequence a crash takes back (and gives to the next message) is
//     skipped as acknowledged or deleted.
//
// # What is kept in memory
//
// A stream's state is rebuilt from its log when it opens: the log is
// replayed as the publishes ran (limits, roll-ups), then the persisted
// head and explicit deletions apply. The subject index costs 12 bytes per
// live message and about 100 bytes plus the subject's length per subject
// (subject_index.go); the duplicate window, one entry per message id
// published within it. Removing a message leaves it in the log (Kafka
// consumers still read it) until the stream's head passes it; then the
// log start follows (once a second).
//
// # Publishing
//
// A publish is checked (expected stream, last sequence, last subject
// sequence, last message id; roll-up; message size; discard-new limits),
// de-duplicated by Nats-Msg-Id within the duplicate window (rebuilt from
// the log, so it survives restarts), appended, and acknowledged once the
// log has committed it: a replica.Syncer group-commits the fsyncs of every
// publisher, whatever the node's --fsync policy says.
//
// # Consumers
//
// One mutex per stream guards the stream and all its consumers, so that
// publishes, acknowledgements and deliveries see one order. Each consumer
// has a goroutine that reads the log without the lock and delivers
// (consumer_deliver.go): redeliveries first, then a last-per-subject
// consumer's starting messages, then new messages in stream order; to the
// oldest pull request whose client still listens, or to a push
// consumer's deliver subject while someone subscribes to it. Ack wait,
// backoff, max_deliver, max_ack_pending, -NAK with a delay, +WPI, +TERM,
// ack policies none/all/explicit, filters, idle heartbeats and the
// retention policies follow nats-server. Consumers with memory storage
// (nats.go's ordered consumers) are not persisted; every other one is,
// ephemeral ones included, and a restart gives those their inactive
// threshold again.
//
// Not implemented, refused with a JetStream error naming it: mirrors,
// sources, subject transforms, republish, per-message TTLs, counters,
// batch publishing, schedules; consumer rate limits, sampling, replay at
// the original pace, priority groups, pausing. Push consumers get no flow
// control requests (their clients need none to work).
//
// Where things are:
//
//	service.go          the Service: Open, Start, Close, Publish
//	store.go            what the node keeps it on: stream logs, definitions
//	stream.go           a stream's state: replay, index, removals, limits
//	stream_publish.go   a publish's checks and append
//	stream_admin.go     create, update, delete
//	stream_ops.go       info, purge, get and delete a message
//	stream_state.go     the persisted head and explicit deletions
//	stream_config.go    StreamConfig, its defaults and checks
//	subject.go          subject patterns: matching, overlaps, filters
//	subject_index.go    live messages by subject
//	dedupe.go           the duplicate window
//	consumer.go         a consumer's position, state and info
//	consumer_deliver.go the delivery goroutine
//	consumer_pull.go    pull requests
//	consumer_ack.go     acknowledgements and retention
//	consumer_admin.go   create, update, delete, list
//	consumer_config.go  ConsumerConfig, its defaults and checks
//	housekeeping.go     age limit, Kafka appends, log start, inactivity, state writes
//	state.go            the state log
//	message.go, headers.go, readlog.go  messages as Kafka records
//	errors.go           nats-server's API errors
package jetstream
