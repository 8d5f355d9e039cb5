// Package crash is Wharf's crash test. It builds the real wharf binary, runs
// `wharf serve` as a child process, puts it under acks=all produce load from
// several franz-go producers, kills it with SIGKILL in the middle of the load,
// restarts it on the same data directory and checks what survived:
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
// SIGKILL ends the process, not the machine: the page cache survives, so the
// test exercises recovery (torn tails, indexes, checkpoints, producer state),
// not whether fsync reached the disk.
//
// The short version (3 kill cycles per test) runs in a plain `go test` and is
// skipped with -short. Longer runs are chosen with flags after the package:
//
//	go test ./e2e/crash/ -v -crash.cycles=50 -timeout=30m
//
// Flags:
//
//	-crash.cycles N     kill/restart cycles per test (default 3)
//	-crash.producers N  concurrent producers, each with its own client (default 4)
//	-crash.rate R       records per second per producer, 0 for unlimited (default 50000)
//	-crash.seed S       seed for the load durations (default: from the clock; logged)
//	-crash.race         build the broker with -race and fail on any race report
//	-crash.keep         keep data directories and broker logs even when the test passes
//
// Failing tests keep their data directories and broker logs and print where.
package crash
