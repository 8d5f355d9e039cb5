// Package cluster runs Wharf as a cluster of real processes on loopback
// (issue 13): it builds the wharf binary, starts three `wharf serve`
// processes with --node-id, --cluster-addr and --initial-cluster, and
// drives them with stock clients (franz-go).
//
//   - TestLeaderKillLosesNothing: an idempotent acks=all producer writes a
//     numbered sequence to an RF3 topic while the partition's leader is
//     killed with SIGKILL and restarted; a consumer then requires lost =
//     duplicated = reordered = 0 and the test logs the failover time
//     (kill → first acknowledgement).
//   - TestGroupCoordinatorKill, TestTxnCoordinatorKill: a consumer group
//     committing, and a transactional producer with a transaction open,
//     while the coordinator's node is killed -9: nothing acknowledged is
//     lost, committed offsets never go backwards, read_committed sees
//     every committed transaction and no aborted one.
//   - TestEveryNodeKnowsEveryLeader: every node names every partition's
//     leader, replica or not, and none that was killed.
//
// -short skips them (each starts three processes).
package cluster
