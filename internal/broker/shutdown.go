package broker

import "context"

// Controlled shutdown (Kafka's controlled.shutdown.enable; KRaft's
// InControlledShutdown). A node about to stop hands the leadership of
// every group it leads to other nodes (internal/node does the handing
// over), and first marks itself as stopping in its broker registration:
// every node applies the mark, and their balancers and ElectLeaders stop
// giving it leaderships back while it hands them away. Started again,
// the node registers afresh (Register), which clears the mark.

// BeginControlledShutdown marks this node as stopping in the metadata
// log, and returns once the mark is applied here or ctx ends. A single
// node, or one not registered yet, has nothing to mark.
func (b *Broker) BeginControlledShutdown(ctx context.Context) error {
	if b.meta.raft == nil {
		return nil
	}
	b.mu.RLock()
	info, registered := b.state.brokers[b.cfg.NodeID]
	b.mu.RUnlock()
	if !registered {
		return nil
	}
	info.ShuttingDown = true
	written := make(chan error, 1)
	// The write is bounded by the metadata write timeout and ends when
	// the broker closes; ctx may end first.
	b.bg.Go(func() { written <- b.meta.write(brokerKey(info.NodeID), info) })
	select {
	case err := <-written:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ShuttingDown reports whether node is in a controlled shutdown: it
// marked itself stopping and has not registered again since.
func (b *Broker) ShuttingDown(node int32) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.state.brokers[node].ShuttingDown
}
