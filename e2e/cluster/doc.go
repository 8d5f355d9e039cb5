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
//
//   - TestAMQPQuorumQueueFailover: amqp091-go against a quorum queue
//     whose leader is killed with SIGKILL mid-stream (issue 14): lost = 0,
//     held deliveries redelivered with x-delivery-count.
//
//   - TestAMQPQuorumQueueThroughput, behind -cluster.quorum-throughput N:
//     msg/s of a quorum queue on three nodes and of a classic queue, with
//     confirms and manual acks.
//
// -short skips them (they start three processes).
package cluster
