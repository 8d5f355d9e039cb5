package broker

import "errors"

// Controlled shutdown (Kafka's controlled.shutdown.enable; KRaft's
// InControlledShutdown). A node about to stop hands the leadership of
// every group it leads to other nodes (internal/node does the handing
// over), and marks itself as stopping in its broker registration: every
// node applies the mark, and their balancers and ElectLeaders stop
// giving it leaderships back while it hands them away, as the hand-over
// of a node stopping too passes it by. Started again, the node registers
// afresh (Register), which clears the mark: the mark and the
// registration are one record, the newest of which wins.

// errShutdownBegun stops a registration once the controlled shutdown
// has begun: written after the mark, it would clear it.
var errShutdownBegun = errors.New("the controlled shutdown has begun")

// BeginControlledShutdown stops Register's attempts and marks this node
// as stopping in the metadata log, in the background: the hand-over does
// not wait for the mark (without a quorum it never commits; a balancer
// that hands a leadership back before it applies is simply handed it
// again), and the write ends when the broker closes. The mark is
// written after any registration still being written (regMu), and with
// the address Register was given even if that registration never
// committed, so that a node stopped before it registered is marked too.
// A single node, one never asked to register, or one removed from the
// cluster has nothing to mark.
func (b *Broker) BeginControlledShutdown() {
	if b.meta.raft == nil || b.RemovedErr() != nil {
		return
	}
	b.shutdownBegun.Store(true)
	b.bg.Go(func() {
		b.regMu.Lock()
		defer b.regMu.Unlock()
		if b.registration == nil {
			return
		}
		info := *b.registration
		info.ShuttingDown = true
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
