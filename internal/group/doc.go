// Package group is Wharf's group coordinator: consumer groups and their
// committed offsets. The Kafka front end (internal/kafka) translates the
// group APIs into calls on a Coordinator; this package holds the state
// machines and their storage and knows nothing of the wire format.
//
// # Group kinds
//
// A group is either "classic" or "consumer":
//
//   - Classic groups speak JoinGroup / SyncGroup / Heartbeat / LeaveGroup.
//     The coordinator elects a leader, picks the protocol every member
//     supports (each member votes for its most preferred common protocol),
//     hands the leader every member's metadata and passes the leader's
//     assignments back to the members. It never looks inside metadata or
//     assignments, so eager and cooperative client assignors work alike.
//     Static members (group.instance.id, KIP-345) keep their place across
//     restarts of the client; member ids are handed out with
//     MEMBER_ID_REQUIRED first when the client asks for it (KIP-394).
//   - Consumer groups speak ConsumerGroupHeartbeat (KIP-848): the
//     coordinator computes the target assignment itself with the "uniform"
//     or "range" assignor and walks each member towards it, revoking
//     partitions before giving them to another member.
//
// A group that only ever received offset commits (an admin tool, a consumer
// that assigns partitions itself) is a classic group with no protocol type,
// as in Kafka. An empty group may change kind; a group with members may not.
//
// # Time
//
// Every deadline (session and rebalance timeouts, the initial rebalance
// delay, pending member ids, KIP-848 revocation timeouts) is state on the
// group. One goroutine per Coordinator wakes a group when its earliest
// deadline passes and the group checks them all, so a wake-up that comes
// late or twice does no harm. Tests drive the same code with a fake clock
// and no goroutine.
//
// # Storage
//
// Committed offsets and group metadata live in the internal topic
// __consumer_offsets, in Kafka's own record format (see codec.go), so the
// topic reads the same as Kafka's to tools that decode it. A group's
// records go to partition abs(javaHashCode(group)) % partitions, Kafka's
// mapping. At start the coordinator reads the whole topic and rebuilds every
// group; a null value (tombstone) removes what its key names.
//
// A partition that cannot be read to its end at start (a batch failing its
// CRC, or the partition offline), or that the broker takes offline later
// (its scrubber found damage), fences only its own groups: every operation
// on them, and FindCoordinator for them, answers COORDINATOR_NOT_AVAILABLE,
// as Kafka does while no broker has that partition loaded, and the groups
// of the other partitions are served as usual. What was read of a damaged
// partition's groups is dropped; they come back once the partition is
// repaired and the node restarted.
package group
