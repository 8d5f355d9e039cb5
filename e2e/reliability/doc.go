// Package reliability checks what Wharf promises under faults other than a
// process crash (those are e2e/crash's): power loss, on-disk corruption, a
// full disk, and bad input at the ports. Every test counts what it checked
// and what went wrong in the same terms: acknowledged writes checked, lost
// (must be 0), unexpected (present but never written there), duplicated,
// out of order. docs/reliability.md has the figures of the last long run.
//
// # Power loss
//
// A power cut loses every write no completed fsync covered. seglog only
// appends to its segment files (besides index files and whole-file renames
// of small checkpoint files), so the honest simulation is: at a chosen
// moment, cut each segment file back to the size it had when its last
// successful fsync started. seglog.SetSyncHook (internal/seglog/synchook.go)
// reports every successful fsync of a .log, .index or .timeindex file with
// that size; powerCut (powercut_test.go) keeps the largest per file (by
// inode) and, at the cut, copies the live data directory twice while
// holding the lock the hook takes, so no fsync completes during the copy:
//
//   - truncated: each segment file cut to its durable size (0 if never
//     fsynced);
//   - zeroed: the unsynced tail overwritten with zeros instead, keeping the
//     size, as a file system that extended the file but lost its blocks.
//
// Other files are copied whole: Wharf replaces them only by renaming a file
// it fsynced first. Acknowledgements are recorded under the same lock, so an
// acknowledgement counts only if it arrived before the cut; since an append
// is acknowledged only after its fsync was reported, every counted one must
// survive. The live log or node keeps running after the cut (nothing it
// writes later can reach the copies) and is then closed normally.
//
//   - TestPowerLossSeglog: a seglog.Log with small segments (8-64 KiB, so
//     it rolls during the load), 4 goroutines appending batches of 1-4
//     records, each durable or not at random (5, 50 or 95% durable, drawn
//     per cut), and a flusher calling Sync every 1-50 ms; cut after
//     20-250 ms; each copy is reopened with seglog.Open and read back:
//     every durable append acknowledged before the cut at its offset with
//     its values, nothing that was not appended there, no duplicate, each
//     writer's batches in order; the reopened log must take a durable
//     append. -reliability.cuts cuts (default 12).
//   - TestPowerLossCheckerSeesLoss: the same with a deliberately wrong cut
//     (4 KiB of durable bytes too many dropped): the checks must report loss.
//   - TestPowerLossNode: a whole node in-process under 3 franz-go producers
//     (acks=all, idempotent, 4 partitions, 64 KiB segments) and 2 amqp091-go
//     publishers (confirm mode, persistent messages, 2 durable queues); cut
//     after 0.3-1.2 s; each copy is started as a new node (node.Start):
//     every acknowledged record at its offset, every confirmed message
//     delivered, no partition offline. -reliability.broker-cuts cuts
//     (default 2).
//   - TestPowerLossNodeAMQPConsumers: a node under 2 amqp091-go publishers
//     (confirms, persistent) over 3 durable queues, 2 of them drained by
//     consumers acking each message, on a slow disk (every fsync of a
//     queue's messages log takes 150 ms longer) with at most 2 segment files
//     open (seglog.SetMaxOpenFiles: the file cache fsyncs settlement logs
//     soon after they are written). After each fsync of a queue log it reads
//     what fsyncs made durable: a settlement naming an offset past the
//     durable end of its messages log is an error, and the cut comes at the
//     first such moment (else after 1-2 s). Each copy is started twice:
//     first every confirmed message not acked before the cut must be
//     delivered, then 100 fresh confirmed messages per queue are published
//     and the node stopped; at the second start every fresh one must be
//     there (a stale settlement would settle the message that took its
//     offset). -reliability.broker-cuts cuts (default 2).
//
// What the model leaves out: directory entries are kept as they were at
// the cut (a real power cut may also lose a create or rename whose directory
// was not fsynced; seglog fsyncs the directory after every segment it
// creates), and reordered or partial writes inside the unsynced tail
// (the tail is dropped whole, or zeroed whole).
//
// # Corruption
//
//   - TestQueueCorruptionThroughTheNode: three durable queues with 300
//     confirmed messages each and a topic beside them; the node is stopped
//     and a byte flipped in one queue's messages log (mid-log) and in the
//     first record of another's settlement log. After a restart the node
//     serves the topic and the intact queue in full; each damaged queue
//     answers passive declare and basic.get with 404 "... has crashed and
//     failed to restart" on its channel (the messages log's once the queue
//     scrubber reaches it, within 20 s), nacks a publish, and is named in
//     the broker log; the connection stays open.
//   - TestCorruptionThroughTheNode: franz-go writes 3000 records to each of
//     3 partitions; the node is closed and the clean-shutdown markers
//     removed (a kill right after a flush); a byte is flipped inside a
//     batch in the middle of partition 0's segment, and partition 1's last
//     batch is torn (its recovery point put back before that batch, as an
//     older checkpoint would have left it). After a restart partition 0 is
//     offline: Partition.Offline is a *seglog.CorruptionError naming the
//     file and position, the broker log says so, Metadata reports
//     KAFKA_STORAGE_ERROR with the node as offline replica, raw Fetch and
//     Produce get KAFKA_STORAGE_ERROR and no bytes, franz-go's producer and
//     consumer get kerr.KafkaStorageError and no record. Partition 1 is
//     repaired (ends at the torn batch, everything before it intact) and
//     takes and serves new records; partition 2 is untouched.
//   - TestCorruptionOutsideRecoveryScan: damage where recovery does not
//     look, by design (seglog/doc.go): a flipped byte after a clean
//     shutdown, a flipped byte and a lost last batch in a closed segment
//     below the recovery point, and a torn batch there. Every damaged
//     partition must go offline within 20 s of the restart with a
//     *seglog.CorruptionError naming the file: the lost and torn batches
//     at Open, the flipped bytes once the broker's scrubber
//     (internal/broker/scrubber.go), which verifies after start-up what
//     recovery trusted, reaches them. For the flipped bytes it also
//     requires the position, the broker log line, and the Kafka view
//     checked in TestCorruptionThroughTheNode. A partition left online is
//     reported with what a franz-go consumer got from it (which must never
//     be a record other than the acknowledged one).
//   - TestUnreadablePartitionThroughTheNode: franz-go writes 3,000 records
//     to each of 3 partitions; with the node stopped, partition 1's segment
//     is replaced by a directory (a file that cannot be opened, as an I/O
//     error or wrong permissions leave it). The node must start with that
//     partition offline (an error line naming the file; the Kafka view
//     checked in TestCorruptionThroughTheNode) and serve every
//     acknowledged record of the other two.
//   - TestCorruptCoordinatorPartitions: commits offsets for a group on each
//     of the 4 partitions of __consumer_offsets and runs a transaction for a
//     transactional id on each of the 4 of __transaction_state, stops the
//     node cleanly, flips a byte inside a batch of partition 1 of both, and
//     restarts with the scrubber off (the coordinators' own reads find the
//     damage). The node must start and log which partitions cannot be read;
//     FindCoordinator, kadm's offset fetch and commit, InitProducerId and
//     DescribeTransactions answer COORDINATOR_NOT_AVAILABLE for the group
//     and the id on partition 1 only; the other groups kept their offsets,
//     a franz-go consumer group of one of them consumes and commits, a
//     transactional producer on a healthy partition commits, and Kafka
//     produce/fetch and AMQP publish/get work.
//   - TestCoordinatorPartitionGoesOffline: the same damage done while the
//     node runs, with the scrubber reading every log every 100 ms: once it
//     takes the partitions offline, the same group and id are fenced and
//     the others serve.
//
// # Metadata loss
//
// The metadata log defines every topic and queue. Both tests start from
// copies of one data directory holding 9,000 acknowledged records (3
// partitions of "orders", 3,000 each) and a group's committed offsets.
//
//   - TestMetadataLossRefusesStart: the metadata log removed, emptied (its
//     files removed), its segment truncated to 0 bytes, or cut short after
//     its first batch with its recovery point intact. The node must refuse
//     to start, naming the metadata log, and leave every other file as it
//     was; with the metadata log put back, every acknowledged record is at
//     its offset and the group's offsets are there.
//   - TestMetadataLossWithStaleCheckpointKeepsData: cut short after its
//     first batch and its recovery point removed, as a copy restored from
//     an older backup would be. The node starts without the lost topics and
//     must move their directories aside (<dir>.<random>-stray, one error
//     line each), not delete them; with the newest metadata log and the
//     directories put back, everything is there.
//
// # Disk full
//
// TestDiskFull mounts a 32 MiB tmpfs (it fails when mount is not permitted:
// it needs root or CAP_SYS_ADMIN), writes an 8 MiB filler file on it, and
// runs a node in-process with its data directory there. Two franz-go
// producers fill it with acks=all 1 KiB records while two amqp091-go
// publishers publish persistent messages in confirm mode. It requires: a
// raw Produce on the full disk gets KAFKA_STORAGE_ERROR, and franz-go
// producers get kerr.KafkaStorageError; AMQP publishers get
// connection.blocked (subtest with the disk alarm at 2 MiB) or nacks
// (subtest with the alarm off); Fetch and AMQP deliveries keep working;
// once the filler is removed Produce succeeds again and AMQP confirms
// resume; every acknowledged record and confirmed message is there, before
// and after a restart. -reliability.disk-fill-rounds repeats it.
//
// TestDiskFullPartialWrite makes one produce run out of space midway (an
// 896 KiB batch with 256 KiB free on an 8 MiB tmpfs): it must get
// KAFKA_STORAGE_ERROR and leave nothing behind, so that after more
// produces and a clean restart the partition is online with every
// acknowledged record. (It guards finding 1 of docs/reliability.md:
// seglog truncates every failed write.)
//
// TestDiskFullTopicCreation creates a 4-partition topic on a full 8 MiB
// tmpfs: CreateTopics must get KAFKA_STORAGE_ERROR and leave neither a
// metadata record nor a directory behind, so the node restarts on the
// still full disk without the topic, and creates it once space is back.
//
// # Bad input
//
// TestBadInput runs franz-go and amqp091-go clients (produce, consume,
// publish with confirms, consume) every 20 ms against a node while it
// throws at both ports, all over loopback and bounded: 50 connections each
// of random bytes, truncated frames, and absurd length prefixes (which the
// node must drop within 3 s); 32 Kafka connections announcing 99 MiB
// requests (the node must not allocate them: at most 16 MiB each); 20 slow
// senders per port dribbling a valid request one byte per 100 ms for 3 s;
// and -reliability.conns idle connections (default 2000, half per port,
// RLIMIT_NOFILE raised as needed). Every good operation must finish within
// 5 s, consumers must receive everything acknowledged, and the goroutines
// must return near their count before the garbage.
// -reliability.bad-rounds repeats the garbage.
//
// TestNonUTF8NamesRefused sends names that are not valid UTF-8 through
// amqp091-go (which sends a Go string's bytes as they are): queue and
// exchange names, binding and routing keys. Each must close its connection
// with 501 FRAME_ERROR "Malformed UTF-8 in shortstr", as RabbitMQ does, and
// leave nothing behind (stored as JSON, "q\xff" would come back as
// "q\uFFFD" after a restart); another connection is unaffected, and queues
// with valid UTF-8 names of any script keep their names and messages across
// a restart.
//
// TestDecompressionBombs sends, for gzip, lz4 and zstd, two concurrent raw
// Produce requests (acks=all) of 48 partitions, each partition one valid
// batch of 600 records of 100,000 zero bytes: 60 MB of records from 64 KB
// of gzip, 246 KB of lz4 or 12 KB of zstd. Every partition must get
// MESSAGE_TOO_LARGE (its records decompress past max.message.bytes),
// nothing may be appended, and the node's live heap, sampled every 2 ms,
// may not grow by more than 512 MiB at its peak; afterwards a franz-go
// producer with gzip compression and a consumer still work on the topic.
//
// # Out of file descriptors
//
// Both tests build cmd/wharf and run `wharf serve` under ulimit -n
// -reliability.fd-limit (default 256), then open 150 idle connections more
// than that to its Kafka port, while a franz-go producer and consumer and
// an amqp091-go publisher (confirms) and getter connected before keep
// working.
//
//   - TestFileDescriptorsRunOut, with --max-connections=0 (no cap): the
//     descriptors run out; the broker must log the failed accepts and keep
//     running (it used to exit). What needs a new descriptor may be
//     refused honestly meanwhile (an AMQP persist that cannot write its
//     recovery point is nacked). Once the idle connections close, new
//     clients must connect within 10 s and everything must work again,
//     every acknowledged record and confirmed message must be there, and
//     SIGTERM must end the broker with status 0.
//   - TestConnectionCapPerListener, with the default cap (three eighths of the
//     open-file limit shared by the listeners: an eighth each of the
//     three): every connection over the cap must be closed
//     at once and logged with the listener's name, the descriptors must
//     not run out, the clients connected before must keep working in full,
//     AMQP and HTTP must accept new connections, and after the flood a new
//     Kafka client must work.
//
// TestFuzzTargets, with -reliability.fuzztime=D, lists every fuzz target of
// the module (go test -list) and runs each for D as a subprocess
// (go test -run=^$ -fuzz=^Name$ -fuzztime=D pkg), one after the other since
// go test -fuzz takes one target at a time. Without the flag it is skipped;
// every go test runs the targets' seed corpora anyway.
//
// # Running
//
// The short versions run in a plain go test (about 50 s for the package).
// TestPowerLossNode, TestPowerLossNodeAMQPConsumers, TestDiskFull,
// TestDiskFullTopicCreation, TestBadInput and the two
// file-descriptor tests (which build the binary) are skipped with -short.
// Long runs:
//
//	go test ./e2e/reliability/ -v -timeout=60m \
//	    -reliability.cuts=200 -reliability.broker-cuts=20 \
//	    -reliability.disk-fill-rounds=3 -reliability.bad-rounds=3 \
//	    -reliability.fuzztime=60s
//
// Flags:
//
//	-reliability.cuts N             power cuts of TestPowerLossSeglog (default 12)
//	-reliability.broker-cuts N      power cuts of TestPowerLossNode and TestPowerLossNodeAMQPConsumers (default 2)
//	-reliability.disk-fill-rounds N fill/free rounds of TestDiskFull (default 1)
//	-reliability.bad-rounds N       rounds of garbage in TestBadInput (default 1)
//	-reliability.conns N            idle connections in TestBadInput (default 2000)
//	-reliability.fd-limit N         broker's open-file limit in the file-descriptor tests (default 256)
//	-reliability.fuzztime D         fuzz every target for D (default 0: skip)
//	-reliability.seed S             seed for the random choices (default: the clock; logged)
//	-reliability.keep               keep the cut copies even when the test passes
//
// Failing power-loss tests keep their copies (live, truncated, zeroed) and
// print where.
package reliability
