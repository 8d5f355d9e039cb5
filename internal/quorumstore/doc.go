// Package quorumstore is the storage of a quorum queue in a cluster
// (issue 14): one Raft group per queue over its members, and one log of
// commands in it, a replica.RaftLog whose records are the queue's
// history. Each member node holds a Store on its replica; the queueing
// core (internal/mq) serves the queue on the node whose replica leads the
// group, and nowhere else.
//
// # Commands
//
// Every record of the log is one command (commands.go):
//
//   - enqueue: a message, as queuestore.MessageRecord makes it (no key;
//     the record's timestamp is the enqueue time); a message of a publish
//     another node forwarded carries one more header, its forward's id
//     and its index in it (ForwardedAs), so that a new leader takes of a
//     repeat of the forward only what the log does not hold (Forwards):
//     the messages, not a record after them, say what was taken, as the
//     store may propose a forward's messages in several entries;
//   - deliver(offset): the message was assigned to a consumer or
//     basic.get; it leaves the leader only once this is committed
//     (HandoutLocked, which waits for the deliver commands so far, not
//     for the records after them), so a new leader always knows it was
//     delivered;
//   - return(offset, n): it went back to the queue, returned n times in
//     all (requeue, nack, a consumer gone: x-delivery-count);
//   - settle(offset): it is done with (ack, discard, dead-lettered);
//   - truncate(offset): every message below it is settled; each replica
//     cuts its log below it once committed (truncate.go). It is a batch
//     of its own, which the truncator finds by its header without
//     reading the messages and commands around it.
//
// A message's offset is the offset of its enqueue record; the other
// commands take offsets too, so a queue's message offsets have gaps.
// On the leader the queue appends commands in its own order (under the
// queue's lock); the store buffers them, messages and commands alike, as
// the records of one batch, and proposes them to the group in one append
// per flush (a batch is an entry of the group's log: a few large ones
// cost the members less than many small ones): at every publisher
// confirm (Sync, which then waits for the commit: a majority of the
// members has the message fsynced), and as soon as its flusher goroutine
// runs otherwise.
//
// # Taking over
//
// The followers' logs are written by Raft; they hold the commands, not
// a queue. The state of the queue is a function of the committed log
// alone, and a node whose replica becomes the leader computes it
// (Replay) before it serves: the unsettled messages in log order, each
// redelivered if it was ever delivered or returned, with its return
// count; a message delivered and not settled when the previous leader
// stopped was held by a consumer on that leader, which is gone, so it is
// returned: its count goes up by one, and the new leader logs that
// return first, so a second failover counts it again.
//
// A proposal that the group refuses (this node no longer leads, or its
// log runs too far ahead of the followers) fails every confirm waiting on
// it, and the store's Failed channel tells the queueing core to stop
// serving: the queue is rebuilt from the log, never from offsets a lost
// proposal handed out.
//
// # Not yet
//
// Membership is fixed at declaration; a takeover reads the queue's log
// (above the last cut) once.
package quorumstore
