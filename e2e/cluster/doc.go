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
//   - TestAMQPQuorumQueueFailover: amqp091-go against a quorum queue
//     whose leader is killed with SIGKILL mid-stream (issue 14): lost = 0,
//     held deliveries redelivered with x-delivery-count.
//   - TestAMQPConsumeAnywhere: publish with confirms on one node and
//     consume on another, neither leading the quorum queue; its leader,
//     on the third, killed -9 mid-stream: lost = 0, the consumer never
//     cancelled, held deliveries redelivered with x-delivery-count 1;
//     logs the time to the first confirm and delivery after the kill.
//   - TestAMQPDeliveryLimitAnywhere: a delivery-limit + dead-letter retry
//     ladder consumed on a node that does not lead counts the return of
//     a kill -9 of the leader as an attempt.
//
// The AMQP tests find a quorum queue's leader from the nodes' logs ("mq:
// quorum queue served here", queueLeader): a client needs no leader.
//   - TestAMQPQuorumQueueThroughput, behind -cluster.quorum-throughput N:
//     msg/s of a quorum queue on three nodes (client on the leader, and on
//     a node that does not lead) and of a classic queue, with confirms
//     and manual acks.
//
// The fault tests (*_fault_test.go) run franz-go, sarama and kafka-go
// producers at once, acks=all, numbered streams into every partition, and
// a checker that counts lost, duplicated (idempotent producers),
// unexpected and reordered records per partition: all must be 0.
//
//   - TestLeaderStoppedFault: SIGSTOP of a leader for three election
//     timeouts, then SIGCONT; a Produce it reads once deposed is refused.
//   - TestRollingRestartFault: every node restarted (SIGTERM) under load.
//   - TestFollowerKilledFault: SIGKILL of a follower.
//   - TestTwoOfFiveKilledFault: five nodes, two killed at once.
//   - TestLeaderIsolatedFault (Linux, root): five nodes in network
//     namespaces; the leader and one other node cut off from the other
//     three. Without root it fails, saying so, unless -short.
//
// -short skips them all (they start three to five processes);
// -cluster.cycles N repeats each fault N times (1 by default).
package cluster
