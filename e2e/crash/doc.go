// Package crash is Wharf's crash test. It builds the real wharf binary, runs
// `wharf serve` as a child process, puts it under load from stock clients,
// kills it with SIGKILL in the middle of the load, restarts it on the same
// data directory and checks what survived.
//
// Kafka (franz-go producers, acks=all):
//
//   - TestCrashKeepsAckedRecords reads every partition back from the start
//     and requires that every acknowledged record is at the offset it was
//     acknowledged at with its value (lost = 0), that no record value appears
//     twice (duplicated = 0) and that, per producer and partition, the
//     acknowledged records' sequence numbers increase with the offset
//     (out-of-order = 0). After the last cycle every cycle's topic is read
//     again, so earlier data is checked after later recoveries too.
//   - TestCrashLogEndCoversAcks only asks the restarted broker for its log end
//     offsets and requires each to be at least the highest acknowledged
//     offset + 1, on one topic that lives through every cycle.
//
// AMQP 0-9-1 (rabbitmq/amqp091-go; durable queues, persistent messages):
//
//   - TestAMQPCrashKeepsConfirmedMessages runs confirm-mode publishers
//     (message-id and body "p-N-seq-M", one queue per message, round robin
//     over three durable queues) and manual-ack consumers (prefetch 50,
//     slower than the publishers so a backlog is queued at the kill). After
//     each restart it drains every queue (consume until a passive
//     queue.declare reports no ready message, cancel, ack the rest, check
//     again) and requires: every confirmed message was delivered at least
//     once over the run (lost = 0; a nack or a confirm that never came
//     leaves a message unconfirmed, free to be missing); no delivery of an
//     id never published or with another body, delivery mode or queue
//     (unexpected = damaged = 0); and no acked message comes back where mq
//     promises it will not (acked-came-back = 0, below). Duplicates and the
//     redelivered flag are counted and logged, not judged. After the last
//     cycle the broker is stopped cleanly with every queue empty, started
//     again and drained once more: not one message may come back.
//   - TestCrashMixedKafkaAndAMQP runs the Kafka producers of
//     TestCrashKeepsAckedRecords and the AMQP load above against the same
//     broker in every cycle, and applies both tests' checks.
//
// Kafka transactions (franz-go GroupTransactSession):
//
//   - TestCrashTransactionsExactlyOnce runs two consume-transform-produce
//     transformers (one group, one transactional id each) from an input topic
//     to an output topic with offsets committed in the transactions, kills
//     the broker while transactions are open, restarts it on the same
//     address, and requires that the output, read with read_committed,
//     holds every input record exactly once (missing = duplicated =
//     unexpected = 0).
//
// What "no acked message comes back" means. basic.ack has no reply, so the
// test knows the broker processed an ack only once a synchronous method on
// the same channel completed after it (consumers send basic.qos every 64
// acks or 20 ms; drains use queue.declare passive and channel.close). mq
// does not make settlements durable at once: its housekeeper writes them
// to the settlement log every 250 ms (mq.Config.HousekeepingInterval, not a
// `wharf serve` flag) with write(2), which survives SIGKILL; a kill loses
// the settlements since the last pass and those messages are delivered
// again, as AMQP's at-least-once allows. So the test holds an ack to the
// promise only if the broker had processed it at least -crash.ack-margin
// (default 1 s, four housekeeping intervals, for a busy machine) before the
// kill; such a message delivered again in a later run fails the test, as
// does one delivered again in the same run after a processed ack. Younger
// acks whose messages come back are counted ("after an ack lost in the
// crash"), with the age of the oldest processed one, which shows how close
// mq is to its 250 ms. A run in which no ack was old enough fails, so the
// check cannot pass by checking nothing.
//
// One data directory, one broker:
//
//   - TestSecondBrokerOnOneDataDirIsRefused starts a second `wharf serve`
//     on the data directory of a running one: it must exit non-zero at once
//     naming the first's pid (the holder of DataDir/.lock), and the first
//     keeps running; after a kill -9 of the first, a new broker starts.
//
// SIGKILL ends the process, not the machine: the page cache survives, so the
// test exercises recovery (torn tails, indexes, checkpoints, producer state,
// settlement logs), not whether fsync reached the disk.
//
// The short version (3 kill cycles per test, 5-12 s each) runs in a plain
// `go test` and is skipped with -short. Longer runs are chosen with flags
// after the package:
//
//	go test ./e2e/crash/ -v -crash.cycles=50 -timeout=30m
//
// Flags:
//
//	-crash.cycles N      kill/restart cycles per test (default 3)
//	-crash.producers N   concurrent Kafka producers, each with its own client (default 4)
//	-crash.rate R        Kafka records per second per producer, 0 for unlimited (default 50000)
//	-crash.amqp-rate R   AMQP messages per second per publisher, 0 for unlimited (default 1500)
//	-crash.ack-margin D  how long before a kill a processed AMQP ack must be persisted (default 1s)
//	-crash.seed S        seed for the load durations (default: from the clock; logged)
//	-crash.race          build the broker with -race and fail on any race report
//	-crash.keep          keep data directories and broker logs even when the test passes
//	-crash.bin PATH      test this wharf binary instead of building ./cmd/wharf
//
// Failing tests keep their data directories and broker logs and print where.
package crash
