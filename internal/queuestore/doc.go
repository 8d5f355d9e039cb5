// Package queuestore is the storage of durable AMQP queues: one Store per
// queue and a Root over the directory holding them all (DataDir/queues).
// A Store keeps its logs behind the log seam (replica.Local) and is a
// replica.Target, which the seam's Syncer commits for publisher confirms,
// a round at a time. The queueing core (internal/mq) keeps a queue's
// state in memory (ready list, consumers, deliveries) and tells its Store
// every change to a logged message's fate; this package knows nothing of
// AMQP beyond the fields of a message it keeps (Message), and imports
// neither mq nor a front end.
//
// # Layout
//
// A store owns two logs in <Root>/<id>/: MessagesLog, one record
// per logged message (value = body; headers carry exchange, routing key
// and the encoded properties; the batch timestamp is the enqueue time),
// and SettlementLog, records naming settled message offsets, and the
// delivery counts of a quorum queue's returned messages. Both are created
// on first use (the first logged message, the first settlement), so a
// declared queue has a definition and no file, and an unused queue has
// none. A clean close leaves "clean-shutdown", the highest offset
// delivered before it: after a clean restart only those messages come
// back marked redelivered; after a crash every one does.
//
// # Settlements and housekeeping
//
// Appends happen under the queue's lock (Owner.Lock), so log order is queue
// order; a publisher's messages are held back (BufferLocked) and written as
// one append per queue right before the fsync their confirms wait for.
// Settlements are kept in memory and written in batches by the Root's
// housekeeper goroutine (every Config.HousekeepingInterval, or sooner when
// many are pending: a crash loses at most those, which are then delivered
// again), which also deletes messages-log segments once every message in
// them is settled and compacts the settlement log. A settlement (or
// delivery count) is written only once the messages log is durable up to
// the offsets it names: the settlement log may be fsynced at any time, and
// a durable settlement of a message a power cut then takes would settle
// the next message to get that offset. Recovery drops settlement records
// naming offsets past the messages log's end for good (left by a version
// without that rule).
//
// # Confirms
//
// Appends do not wait for fsync. The queueing core's replica.Syncer
// collects waiting confirms, syncs each Target they name once per round
// (group commit across publishers and queues; the queueing core adds its
// stream queues' topics as Targets too) and then completes every waiter
// the round covered. A Store's Sync writes the messages held back since
// the last round, one append per queue, and commits its messages log. It
// fails closed: a log whose fsync failed, or that was closed before its
// messages were made durable, fails the confirms (nacks); only a deleted
// queue's messages are confirmed without an fsync, as RabbitMQ confirms
// them.
//
// # Damage and strays
//
// A store whose logs cannot be opened or read back (Root.Open fails, a
// read fails with IsDamage), or that the scrubber finds damaged (the logs'
// CRC scrub of every log after Start, and at Config.ScrubInterval), has
// its queue crashed: the store is closed without a clean-shutdown marker
// and keeps its files (Owner.Crash, Store.CloseWithoutMarker). Store
// directories that no durable queue names are moved aside at start-up
// (SetAsideStrays: <id>.<unix ms>-stray, logged at ERROR), never deleted:
// definitions that were lost must not cost the data too.
//
// # The seam, and replicated queues
//
// The queueing core reaches a store only through the methods of its
// queueStore interface (mq/storage.go): BufferLocked and AppendLocked
// (enqueue), DeliveredLocked, SettleLocked and NoteReturnLocked (the fate
// of a logged message), ReadLocked (page-in), Open with Unsettled and Scan
// (recovery), Sync through the Syncer (confirms), CloseWithoutMarker and
// Delete. Offsets are the store's, never made up by the queue, and a
// queue's logged state is exactly what these calls said, in order: so it
// can be rebuilt from the store alone, which is what recovery does.
//
// This Store is local: on one node its log is the queue's only history and
// log order is queue order, so a message is applied (enqueued, offered to
// consumers) as soon as BufferLocked returns its offset, and only its
// confirm waits for the fsync. The replicated store of a quorum queue in
// a cluster (internal/quorumstore: a Raft group per queue, one log of
// commands) keeps these calls, each a command of the log; Sync waits for
// the commit, the queue hands out a message only once its enqueue is
// committed, and a new leader rebuilds the queue from the committed log
// through the same Unsettled and Scan that recovery uses here.
package queuestore
