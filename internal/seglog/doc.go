// Package seglog is Wharf's segmented append-only log, the one storage
// primitive under every Kafka partition, internal topic, the metadata log
// and every AMQP durable queue.
//
// A Log is a directory:
//
//	00000000000000000000.log        record batches exactly as produced, base offsets rewritten
//	00000000000000000000.index      8-byte entries: uint32 relative offset, uint32 file position,
//	                                one per ~IndexIntervalBytes of batches
//	00000000000000000000.timeindex  12-byte entries: int64 timestamp, uint32 relative offset
//	recovery-point                  text: the offset below which every byte is known fsynced
//	log-start-offset                text: the first readable offset (DeleteRecords, retention)
//	leader-epoch-checkpoint         text: where each leader epoch above 0 begins (epochs.go);
//	                                absent while the log never left epoch 0
//	clean-shutdown                  present only between Close and the next Open
//	cleaner-offset                  text: compaction checkpoint, segments below it are compacted
//	<base>.log.cleaned, .swap (and the index files' likewise) only while compaction
//	                                swaps a segment in (swap.go)
//
// Segments are named by the 20-digit offset of their first batch. The last
// segment is the active one; appends go only there.
//
// # Leader epochs
//
// Append stamps AppendOptions.LeaderEpoch (0 on a single node) into every
// batch's PartitionLeaderEpoch, which Kafka's CRC does not cover, and the
// epoch index records where each epoch begins (epochs.go): the term of an
// offset, as Raft asks for it. AppendAt writes batches that carry their
// offsets already, at a given epoch, as a follower copies its leader;
// TruncateTo cuts a log back to a batch boundary, with its epoch index,
// as a follower drops what diverged from its leader (truncate.go). Both
// exist for replication, which sits above this package.
//
// # Durability
//
// Append writes each produce payload with one write(2). A durable append
// (acks=all) returns only after an fsync covering it; concurrent durable
// appenders share fsyncs through group commit (durability.go), a pipeline
// with exactly one fsync of the log in flight at a time. A commit round
// takes the log end offset as its target, fdatasyncs the active segment
// (and, the first time, the directories leading to a new log), and marks
// everything below the target durable. A waiter waits for the round in
// flight and, if its data came after that round's target, for the next
// one, which starts the moment the previous fsync returns and covers
// everything appended by then: the first waiter to find no round in flight
// runs one itself, and while waiters keep wanting more a short-lived
// goroutine of the log runs rounds back to back, so the disk never waits
// for a woken waiter to be scheduled. Sync is the same operation for the
// broker's background flusher, and also persists the recovery point, at
// most every 250 ms, so the acknowledgement path stays one fsync. Rolling a
// segment fsyncs the segment it closes (and its indexes) before the next
// one is created: a torn write can only be in the last segment, and closed
// segments' index files can be trusted. Index entries reach their files
// only then and at Close; the active segment's are rebuilt after a crash.
//
// A failed fsync fails the log: Linux reports a write-back error to one
// fsync and forgets it, so a retry, or a second fsync of the same file
// running beside the failing one, can succeed for data that is gone. Every
// fsync of a segment file therefore goes through its file handle, one at a
// time, and the handle keeps the first failure (handles.go); the log then
// refuses appends, syncs and durable waits for anything not durable before,
// until it is reopened (Kafka's offline log directory). SetSyncFault
// (syncfault.go) injects such failures in tests.
//
// # Recovery
//
// Open after a clean Close trusts the files, as Kafka does: index files are
// only sanity-checked (rebuilt from batch headers if missing or
// inconsistent) and the batches after each segment's last index entry are
// walked. Damage done to a cleanly closed log is therefore not noticed at
// Open. After an unclean stop every batch from the segment holding the
// recovery point to the end is verified with record.Verify (CRC-32C) and
// those segments' indexes are rebuilt. The first bad batch is dropped, by
// truncating the file at its position with a warning, only if it is a torn
// tail: in the last segment, above the recovery point, and with no valid
// batch anywhere after it. Anything else is a *CorruptionError and nothing
// is truncated: a flipped bit in the middle of a log must take the partition
// offline, not silently drop the acknowledged data after it. The active
// segment's file runs ahead of its data with preallocated zeros
// (segment.go); after a crash those zeros are where the log ends, cut off
// without a warning, and a torn batch followed by them is a torn tail like
// any other.
//
// # Scrubbing
//
// What Open trusts is checked afterwards by Scrub (scrub.go), which the
// broker runs in the background right after start-up: it reads the segments
// Open did not verify a chunk at a time, at a bounded rate, and verifies
// every batch's CRC-32C and offsets. The first bad batch marks the log
// corrupt: Read and Append return its *CorruptionError from then on, and
// the broker takes the partition offline. Until the scrub reaches the
// damage, a damaged batch can still be served (clients' own CRC checks
// reject it); the window lasts about the time the scrub needs to read the
// log up to it.
//
// # Reading
//
// Read returns a Slice of file ranges holding whole batches (ReadBelow
// leaves out those from an offset on); Slice.WriteTo sends them with
// sendfile(2) to a TCP connection (sendfile_linux.go explains why it calls
// sendfile itself). Slice.WriteMappedTo hands a writer that must read the
// bytes (a TLS connection encrypting them) the page cache itself: each
// segment file is mapped once and the mapping kept with its open
// descriptor, at most 1,024 at a time; a chunk not all in the page cache
// is copied instead, and a file cut short under a read fails that read,
// not the process (mapped_linux.go). A Slice holds
// references on its segments, so retention can delete a segment while a
// fetch is still sending it: the files are unlinked at once and closed
// (and unmapped) on the last Release.
//
// # Compaction
//
// With cleanup.policy "compact" (Config.Compact), Compact keeps only the
// latest record of each key in the closed segments, removes tombstones
// after delete.retention.ms, keeps the header of each idempotent producer's
// last batch (emptied if need be) until producer.id.expiration.ms, so that
// producer state can be rebuilt from the log (compact_producers.go), and
// never changes an offset; compact.go describes a pass and swap.go how a
// rewritten segment replaces the old ones so that a crash at any point
// leaves either. A compacted closed segment skips the removed offsets, so
// offsets in a closed segment need only increase (recovery allows that;
// the active segment must stay contiguous), and Read at a removed offset
// starts at the next batch. Retention applies only when the policy has
// "delete" (Config.Delete).
package seglog
