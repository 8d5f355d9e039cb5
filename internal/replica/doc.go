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
// A Commit waits for it: every append gets its own (Appended.Commit),
// Commit(upTo) makes one for any offsets, and Sync waits for everything
// appended so far. What a Kafka producer's acknowledgement waits for is
// the log's FsyncPolicy's choice (Appended.Ack, AckFor): by default acks=all
// waits for the commit and acks=1 for nothing; under FsyncAlways every
// write waits, under FsyncInterval none does. The metadata log,
// transaction markers and publisher confirms wait for the commit whatever
// the policy. A Commit whose offsets were cut by TruncateTo fails with
// ErrTruncated, never vouching for the batches written at those offsets
// later.
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
// Step 2 keeps the partition's own segmented log as the Raft log's data,
// with no second copy: each Raft entry that carries records is one
// append, its batches stored at their Kafka offsets with its term stamped
// in them as the leader epoch. etcd raft's Storage then maps onto a Local
// (whose high watermark is its end, so its reads reach every entry) and
// what the Raft implementation keeps beside it: InitialState onto Raft's
// hard state and membership, LastIndex and FirstIndex onto the entries at
// EndOffset and StartOffset, Entries onto reads, Term(i) onto EpochAt of
// the entry's offsets, Snapshot onto the state a partition rebuilds from
// its log. But Raft also appends entries that carry no records, the empty
// entry a new leader proposes and membership changes; they take Raft
// indexes and must not take Kafka offsets, or consumers would see offsets
// jump. So the two numberings stay apart: beside the log, the Raft
// implementation keeps those entries and the translation between Raft
// index and offset (as Redpanda's offset translator does), and the term
// of the entry just below FirstIndex, which Term must still answer once
// retention or a snapshot dropped the entry. Nothing in this interface
// exposes Raft indexes: the cores see Kafka offsets only.
//
// # Storage
//
// Retention, compaction, scrubbing and the rest of Storage act on this
// replica's files, the same in every implementation.
package replica
