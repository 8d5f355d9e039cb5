package raft

import (
	"cmp"
	"context"
	"slices"
	"sync"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Handler takes what a transport receives: a Host.
type Handler interface {
	Deliver(from uint64, envs []Envelope)
	// Connected tells that a connection to node from is open; the
	// Deliver of what arrives on it comes after.
	Connected(from uint64)
	// Disconnected tells that a connection to node from broke: what was
	// sent either way on it may be lost. It comes after the Deliver of
	// the last batch that arrived on that connection.
	Disconnected(from uint64)
}

// MemNetwork connects hosts in one process, for tests. By default a batch
// sent reaches its host at once (the host only queues it). Under a clock
// (SetFault) batches wait in the network until Flush delivers the ones
// whose time has come, and the fault function may drop, delay or
// duplicate each; Cut severs a link in one direction. Every batch is a
// deep copy, as a real network's would be.
type MemNetwork struct {
	mu       sync.Mutex
	handlers map[uint64]Handler
	cut      map[[2]uint64]bool
	fault    func(from, to uint64) Fate
	queued   []inFlight
	seq      int64
	now      int64
	sent     int64 // batches handed to the network
	dropped  int64 // batches dropped (cut links, faults, unknown nodes)
}

// Fate is what the network does to one batch: drop it, or deliver it
// Delay steps of the clock from now, and a second copy DupDelay steps
// from now if Duplicate.
type Fate struct {
	Drop      bool
	Delay     int64
	Duplicate bool
	DupDelay  int64
}

type inFlight struct {
	due, seq int64
	from, to uint64
	envs     []Envelope
}

// NewMemNetwork returns a network with no hosts.
func NewMemNetwork() *MemNetwork {
	return &MemNetwork{handlers: map[uint64]Handler{}, cut: map[[2]uint64]bool{}}
}

// Register makes h the receiver of what is sent to node (replacing any
// earlier one, as a restarted node's host does).
func (n *MemNetwork) Register(node uint64, h Handler) {
	n.mu.Lock()
	n.handlers[node] = h
	n.mu.Unlock()
}

// Disconnect tells nodes a and b that their connection broke, as a
// transport between processes does when one of them dies or the link
// fails (Handler.Disconnected); Connect, that a new one opened
// (Handler.Connected). Neither changes what the network carries: what is
// lost with a connection is the fault function's to drop, or Cut's.
func (n *MemNetwork) Disconnect(a, b uint64) {
	n.link(a, b, Handler.Disconnected)
}

// Connect tells nodes a and b that a connection between them opened.
func (n *MemNetwork) Connect(a, b uint64) {
	n.link(a, b, Handler.Connected)
}

// link tells both ends of a connection what became of it.
func (n *MemNetwork) link(a, b uint64, tell func(h Handler, peer uint64)) {
	n.mu.Lock()
	ha, hb := n.handlers[a], n.handlers[b]
	n.mu.Unlock()
	if ha != nil {
		tell(ha, b)
	}
	if hb != nil {
		tell(hb, a)
	}
}

// Unregister drops node's receiver: what is sent to it is lost.
func (n *MemNetwork) Unregister(node uint64) {
	n.mu.Lock()
	delete(n.handlers, node)
	n.mu.Unlock()
}

// SetFault puts the network under a clock with fault: from now on
// batches wait for Flush.
func (n *MemNetwork) SetFault(fault func(from, to uint64) Fate) {
	n.mu.Lock()
	n.fault = fault
	n.mu.Unlock()
}

// Cut severs (or with cut false, restores) the link from a to b.
func (n *MemNetwork) Cut(a, b uint64, cut bool) {
	n.mu.Lock()
	if cut {
		n.cut[[2]uint64{a, b}] = true
	} else {
		delete(n.cut, [2]uint64{a, b})
	}
	n.mu.Unlock()
}

// Stats returns how many batches were sent and how many dropped.
func (n *MemNetwork) Stats() (sent, dropped int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.sent, n.dropped
}

// Transport is node's side of the network.
func (n *MemNetwork) Transport(node uint64) Transport { return memTransport{n: n, from: node} }

// Flush moves the clock to now and delivers every batch due by then, in
// the order they fall due.
func (n *MemNetwork) Flush(now int64) {
	n.mu.Lock()
	n.now = now
	slices.SortFunc(n.queued, func(a, b inFlight) int {
		return cmp.Or(cmp.Compare(a.due, b.due), cmp.Compare(a.seq, b.seq))
	})
	i := 0
	for i < len(n.queued) && n.queued[i].due <= now {
		i++
	}
	due := slices.Clone(n.queued[:i])
	n.queued = slices.Delete(n.queued, 0, i)
	n.mu.Unlock()
	for _, f := range due {
		n.deliver(f.from, f.to, f.envs)
	}
}

// Pending is the number of batches waiting in the network.
func (n *MemNetwork) Pending() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.queued)
}

func (n *MemNetwork) send(from, to uint64, envs []Envelope) {
	envs = cloneEnvelopes(envs)
	n.mu.Lock()
	n.sent++
	if n.cut[[2]uint64{from, to}] {
		n.dropped++
		n.mu.Unlock()
		return
	}
	if n.fault == nil {
		n.mu.Unlock()
		n.deliver(from, to, envs)
		return
	}
	fate := n.fault(from, to)
	if fate.Drop {
		n.dropped++
	} else {
		n.enqueue(from, to, envs, fate.Delay)
		if fate.Duplicate {
			n.enqueue(from, to, cloneEnvelopes(envs), fate.DupDelay)
		}
	}
	n.mu.Unlock()
}

// enqueue holds a batch until now+delay. Caller holds mu.
func (n *MemNetwork) enqueue(from, to uint64, envs []Envelope, delay int64) {
	n.seq++
	n.queued = append(n.queued, inFlight{due: n.now + max(delay, 0), seq: n.seq, from: from, to: to, envs: envs})
}

func (n *MemNetwork) deliver(from, to uint64, envs []Envelope) {
	n.mu.Lock()
	h := n.handlers[to]
	cut := n.cut[[2]uint64{from, to}]
	if h == nil || cut {
		n.dropped++
	}
	n.mu.Unlock()
	if h != nil && !cut {
		h.Deliver(from, envs)
	}
}

// cloneEnvelopes deep-copies a batch: the receiver owns what it gets.
func cloneEnvelopes(envs []Envelope) []Envelope {
	out := make([]Envelope, len(envs))
	for i, e := range envs {
		if e.Msg != nil {
			e.Msg = proto.Clone(e.Msg).(*pb.Message)
		}
		e.Data = slices.Clone(e.Data)
		out[i] = e
	}
	return out
}

type memTransport struct {
	n    *MemNetwork
	from uint64
}

func (t memTransport) Send(to uint64, envs []Envelope) { t.n.send(t.from, to, envs) }

func (t memTransport) Stream(ctx context.Context, to uint64, envs []Envelope) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t.n.send(t.from, to, envs)
	return nil
}
