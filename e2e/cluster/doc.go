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
// -short skips it (it starts three processes).
package cluster
