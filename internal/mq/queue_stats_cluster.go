package mq

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/wharf-mq/wharf/internal/rate"
)

// Figures of queues served on other nodes (issue 14). In a cluster a
// durable classic queue is served by its home node and a quorum queue by
// its leader; only that node knows its messages, consumers and message
// counters. The management API shows every queue with the figures of the
// node serving it, on any node, as RabbitMQ's does: a listing asks each
// node serving some of its queues once, for all of them (opStats, a node
// call answered by answerCall), all nodes at once, and waits statsWait at
// most. A queue whose node is out of contact, does not answer in time or
// no longer serves it, or a quorum queue with no leader this node knows
// of, is shown with RabbitMQ's state "down" (as RabbitMQ shows a classic
// queue whose node is down). A single node never calls: all its queues
// are its own.

// statsWait bounds how long a listing waits for the nodes serving its
// queues: a management request answers within about a second even while
// a node is dead but not yet known to be.
const statsWait = 800 * time.Millisecond

// servedRef names a queue in an opStats call.
type servedRef struct {
	VHost string `json:"vhost"`
	Name  string `json:"name"`
	// Queue is the queue's id: one deleted and declared again is not
	// the one asked about.
	Queue string `json:"queue"`
}

// servedFigures is what the node serving a queue knows of it alone.
type servedFigures struct {
	Ready        int         `json:"ready"`
	Unacked      int         `json:"unacked"`
	Consumers    int         `json:"consumers"`
	State        string      `json:"state"`
	MessageStats []rate.Stat `json:"message_stats"`
	Depth        []rate.Stat `json:"depth"`
}

// statsAsk is a queue served on another node and the statistics shown of
// it, which its node's figures fill in.
type statsAsk struct {
	q  *queue
	st *QueueStats
}

// QueueStats returns, for each of vs, the statistics of its queues,
// sorted by name, each with the figures of the node serving it, the
// other nodes' transient and exclusive queues among them
// (local_cluster.go), and the nodes that did not answer in time with
// theirs (those are missing).
func (r *Registry) QueueStats(ctx context.Context, vs []*VHost) ([][]QueueStats, []int32) {
	// The other nodes' own queues are asked for while the serving
	// nodes are: a node that does not answer costs one wait, not two.
	var (
		others     []NodeQueue
		unanswered []int32
		asked      sync.WaitGroup
	)
	if len(vs) > 0 {
		asked.Go(func() { others, unanswered = r.LocalQueuesElsewhere(ctx, askedVHost(vs), "") })
	}
	out := r.statsHere(ctx, vs)
	asked.Wait()
	withQueuesElsewhere(vs, out, others)
	return out, unanswered
}

// statsHere returns, for each of vs, the statistics of the queues this
// node has, sorted by name, each with the figures of the node serving
// it.
func (r *Registry) statsHere(ctx context.Context, vs []*VHost) [][]QueueStats {
	now := time.Now()
	out := make([][]QueueStats, len(vs))
	var asks []statsAsk
	for i, v := range vs {
		// Another node's exclusive queues are in its own answer
		// (local_cluster.go), not here, though recorded
		// (exclusive_cluster.go).
		qs := slices.DeleteFunc(v.sortedQueues(), func(q *queue) bool { return !q.def.Durable && q.elsewhere() })
		out[i] = make([]QueueStats, len(qs))
		for j, q := range qs {
			out[i][j] = q.statsAt(now)
			if q.elsewhere() {
				asks = append(asks, statsAsk{q: q, st: &out[i][j]})
			}
		}
	}
	r.askServingNodes(ctx, asks)
	return out
}

// QueueStatsOf returns one queue's statistics, with the figures of the
// node serving it, or a 404 *Error. A queue this node does not have is
// looked for among the other nodes' transient and exclusive queues (the
// lowest node's, should two have one of that name); if none has it, it
// returns the nodes that did not answer as well.
func (v *VHost) QueueStatsOf(ctx context.Context, name string) (QueueStats, []int32, error) {
	q, err := v.lookupQueue(name)
	if err != nil {
		others, unanswered := v.r.LocalQueuesElsewhere(ctx, v.name, name)
		if len(others) == 0 {
			return QueueStats{}, unanswered, err
		}
		return slices.MinFunc(others, func(a, b NodeQueue) int { return cmp.Compare(a.Node, b.Node) }).QueueStats, nil, nil
	}
	st := q.statsAt(time.Now())
	if q.elsewhere() {
		v.r.askServingNodes(ctx, []statsAsk{{q: q, st: &st}})
	}
	return st, nil, nil
}

// askServingNodes fills in the figures of asks from the nodes serving
// their queues, one call per node, made at once.
func (r *Registry) askServingNodes(ctx context.Context, asks []statsAsk) {
	c := r.cfg.Cluster
	if len(asks) == 0 || c == nil || c.CallNode == nil {
		return
	}
	byNode := make(map[int32][]statsAsk)
	for _, a := range asks {
		if node := a.st.Node; node > 0 && r.peerUp(node) {
			byNode[node] = append(byNode[node], a)
		} else {
			a.st.State = "down"
		}
	}
	ctx, cancel := context.WithTimeout(ctx, statsWait)
	defer cancel()
	var wg sync.WaitGroup
	for node, nodeAsks := range byNode {
		wg.Go(func() { r.askNode(ctx, node, nodeAsks) })
	}
	wg.Wait()
}

// askNode asks node for the figures of asks' queues.
func (r *Registry) askNode(ctx context.Context, node int32, asks []statsAsk) {
	req := remoteRequest{Op: opStats, Served: make([]servedRef, len(asks))}
	for i, a := range asks {
		req.Served[i] = servedRef{VHost: a.q.vh.name, Name: a.q.name, Queue: a.q.id}
	}
	var reply remoteReply
	data, err := json.Marshal(&req)
	if err == nil {
		data, err = r.cfg.Cluster.CallNode(ctx, node, data)
	}
	if err == nil {
		err = json.Unmarshal(data, &reply)
	}
	for i, a := range asks {
		if err != nil || i >= len(reply.Figures) || reply.Figures[i] == nil {
			a.st.State = "down"
			continue
		}
		a.st.show(reply.Figures[i])
	}
}

// show puts the figures of the node serving the queue in st.
func (st *QueueStats) show(f *servedFigures) {
	st.MessagesReady, st.MessagesUnacknowledged, st.Messages = f.Ready, f.Unacked, f.Ready+f.Unacked
	st.Consumers, st.State = f.Consumers, f.State
	st.MessageStats, st.Depth = f.MessageStats, f.Depth
}

// servedFiguresOf answers opStats: the figures of each queue of refs
// this node serves, nil for the others.
func (r *Registry) servedFiguresOf(refs []servedRef) []*servedFigures {
	out := make([]*servedFigures, len(refs))
	if r.closed.Load() {
		return out
	}
	now := time.Now()
	for i, ref := range refs {
		q := r.queueNamed(ref.VHost, ref.Name)
		if q == nil || q.id != ref.Queue || q.elsewhere() {
			continue
		}
		st := q.statsAt(now)
		f := figuresOf(&st)
		out[i] = &f
	}
	return out
}

// figuresOf is what the node serving a queue sends of its statistics st.
func figuresOf(st *QueueStats) servedFigures {
	return servedFigures{Ready: st.MessagesReady, Unacked: st.MessagesUnacknowledged, Consumers: st.Consumers,
		State: st.State, MessageStats: st.MessageStats, Depth: st.Depth}
}
