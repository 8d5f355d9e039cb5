package broker

// Controlled shutdown (Kafka's controlled.shutdown.enable; KRaft's
// InControlledShutdown). A node about to stop hands the leadership of
// every group it leads to other nodes (internal/node does the handing
// over), and marks itself as stopping in its broker registration: every
// node applies the mark, and their balancers and ElectLeaders stop
// giving it leaderships back while it hands them away, as the hand-over
// of a node stopping too passes it by. Started again, the node registers
// afresh (Register), which clears the mark.

// BeginControlledShutdown starts marking this node as stopping in the
// metadata log, in the background: the hand-over does not wait for the
// mark (without a quorum it never commits; a balancer that hands a
// leadership back before it applies is simply handed it again), and the
// write ends when the broker closes. A single node, or one not
// registered yet, has nothing to mark.
func (b *Broker) BeginControlledShutdown() {
	if b.meta.raft == nil {
		return
	}
	b.mu.RLock()
	info, registered := b.state.brokers[b.cfg.NodeID]
	b.mu.RUnlock()
	if !registered {
		return
	}
	info.ShuttingDown = true
	b.bg.Go(func() {
		if err := b.meta.write(brokerKey(info.NodeID), info); err != nil {
			b.logger.Warn("marking this node as shutting down failed", "err", err)
		}
	})
}

// ShuttingDown reports whether node is in a controlled shutdown: it
// marked itself stopping and has not registered again since.
func (b *Broker) ShuttingDown(node int32) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.state.brokers[node].ShuttingDown
}
