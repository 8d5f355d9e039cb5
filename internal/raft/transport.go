package raft

import "context"

// Transport carries envelopes from this host to the others. Receiving is
// the transport's business too: it hands what arrives to the host's
// Deliver. One between processes hands over no entry whose data is a
// record batch without checking the batch's CRC on the way (as TCP's
// frames do): a replica writes the batches it gets without checking them
// again.
type Transport interface {
	// Send queues envs for node to and returns at once. What does not fit
	// in the queue, or cannot reach the node, is dropped: Raft sends it
	// again.
	Send(to uint64, envs []Envelope)
	// Stream is Send for the bulk of a snapshot: it waits for room in
	// the queue rather than drop, until ctx ends.
	Stream(ctx context.Context, to uint64, envs []Envelope) error
}
