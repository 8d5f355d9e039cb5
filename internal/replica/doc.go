// Package replica is the seam between Wharf's cores and their storage:
// the Log that Kafka partitions (internal/broker), the metadata log and
// durable queue stores (internal/queuestore) hold, and the machinery that
// commits what they append. Only this package uses internal/seglog; the
// cores, the front ends and the node reach every log through it. Its
// first implementation, Local, is one node's log; step 2 of issue 13
// implements Log a second time with Raft, and the conformance suite in
// replicatest is what both must pass.
//
// # Appending and committing
//
// Append writes batches at the end of the log, gives them consecutive
// offsets and stamps the leader's epoch into each batch's
// PartitionLeaderEpoch. It returns as soon as the batches are in the log:
// readable (up to the high watermark) and ordered before the next append.
// Committed is what the writer's acknowledgement may rely on:
//
//   - on a single node (Local), committed means fsynced: seglog's group
//     commit, in which concurrent waiters share fsyncs;
//   - in a cluster, fsynced by a majority of the replicas (Raft's commit
//     index).
//
// A Commit waits for it. Append hands back the one its acknowledgement
// needs (Appended.Ack) under the log's FsyncPolicy: acks=all writes and
// publisher confirms wait for the commit; under FsyncAlways every write
// does, under FsyncInterval none does. Commit(upTo) waits for any offsets,
// Sync for everything appended so far. A Commit whose offsets were cut by
// TruncateTo fails with ErrTruncated, never vouching for the batches
// written at those offsets later.
//
// Two helpers commit on behalf of writers that must not block: a Flusher
// (flusher.go) syncs the logs opened with it every flush interval and ahead
// of it (the Kafka core's --flush-interval and the 16 MiB flush-ahead), and
// a Syncer (syncer.go) completes publisher confirms in rounds, each syncing
// every log its waiters name once (one write and one fsync per durable
// queue per round, however many messages and publishers).
//
// # The high watermark and reads
//
// HighWatermark is the offset below which consumers may read; Read and
// ReadBelow never return a batch at or past it, so no consumer sees a
// record that a leader change could take back. On a single node it is the
// end offset, as on a one-replica Kafka partition: every record written is
// as replicated as it will ever be, and acks=1 data is readable before it
// is fsynced, as in Kafka. In a cluster it is the commit index.
//
// # Followers: AppendAt and TruncateTo
//
// A follower's log is written by its replication loop, never by a core:
// AppendAt stores a leader's batches at the offsets they carry, verifying
// each, at the epoch the leader wrote them under; TruncateTo first cuts
// the suffix that diverged from the leader's log (an uncommitted tail a
// deposed leader wrote), which lies above the high watermark, so no reader
// ever saw it. The epoch index (Epochs, EpochAt) is what finds that point:
// the last offset where this log and the leader's agree on the epoch, as
// Kafka's OffsetsForLeaderEpoch and Raft's log matching do.
//
// # Kafka offsets and Raft indexes (step 2)
//
// The partition's own segmented log is the Raft log: one Raft entry per
// append, its data the batches and its term the leader epoch stamped in
// them. So etcd raft's Storage maps onto a Log and its epoch index:
// LastIndex and FirstIndex onto EndOffset and StartOffset, Entries onto
// the log's batches, Term(i) onto EpochAt. But Raft also appends entries
// that hold no records (the empty entry a new leader commits, membership
// changes), and those must not take Kafka offsets, or consumers would see
// offsets jump. Kafka offsets therefore stay what Append assigns, and the
// Raft implementation keeps the translation between a Raft index and the
// offsets of its entry beside the log (as Redpanda and Kafka's KRaft do),
// together with Raft's hard state and membership, and the term of the
// entry just below FirstIndex, which Term must answer after retention or
// a snapshot dropped it. Nothing in this interface exposes Raft indexes:
// the cores see offsets only.
//
// # Storage
//
// Retention, compaction, scrubbing and the rest of Storage act on this
// replica's files, the same in every implementation.
package replica
