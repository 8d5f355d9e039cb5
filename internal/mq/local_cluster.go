package mq

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// Queues and exchanges only their node has (issue 14). Transient queues
// and exchanges, and exclusive queues, are not in the definition store
// (cluster.go): they exist on the node that declared them alone.
// RabbitMQ's management API lists them on every node, a queue with its
// node and figures, and their bindings (those from and to a transient
// exchange or queue are not recorded either); so a listing here asks
// every other node for its own (opLocalQueues, opLocalExchanges,
// opLocalBindings) as it asks for its clients (fromOtherNodes,
// clients_cluster.go). Only the listing: such a queue is still used on
// its own node alone.

const (
	// opLocalQueues asks a node for its transient and exclusive queues,
	// with their figures: those of the request's VHost, or the one(s) of
	// its Name (empty: any).
	opLocalQueues remoteOp = "local-queues"
	// opLocalExchanges asks a node for its transient exchanges, as
	// opLocalQueues does for queues.
	opLocalExchanges remoteOp = "local-exchanges"
	// opLocalBindings asks a node for its bindings that are not in the
	// definition store, those of the request's VHost (empty: any).
	opLocalBindings remoteOp = "local-bindings"
	// opLocalTotals asks a node how many of them each vhost (the
	// request's VHost, empty: any) has, and their messages:
	// /api/overview's counts, polled by every open console, without
	// every queue's figures (about 0.6 KB a queue).
	opLocalTotals remoteOp = "local-totals"
)

// VHostTotals counts a vhost's queues and exchanges, and sums its
// queues' messages (none of a queue whose node gave no figures).
type VHostTotals struct {
	VHost     string `json:"vhost"`
	Queues    int    `json:"queues,omitempty"`
	Exchanges int    `json:"exchanges,omitempty"`
	Messages  int    `json:"messages,omitempty"`
	Ready     int    `json:"ready,omitempty"`
	Unacked   int    `json:"unacked,omitempty"`
}

// Add counts o's queues, exchanges and messages in t.
func (t *VHostTotals) Add(o VHostTotals) {
	t.Queues += o.Queues
	t.Exchanges += o.Exchanges
	t.Messages += o.Messages
	t.Ready += o.Ready
	t.Unacked += o.Unacked
}

// Totals returns the totals of each of vs: the queues and exchanges this
// node has, with the messages the nodes serving the queues count, and
// the other nodes' transient and exclusive queues and transient
// exchanges; and the nodes that did not answer in time (theirs are
// missing).
func (r *Registry) Totals(ctx context.Context, vs []*VHost) ([]VHostTotals, []int32) {
	var (
		others     []VHostTotals
		unanswered []int32
		asked      sync.WaitGroup
	)
	if len(vs) > 0 {
		asked.Go(func() {
			others, unanswered = fromOtherNodes(ctx, r, &clientsRequest{Op: opLocalTotals, VHost: askedVHost(vs)},
				func(_ int32, reply *clientsReply) ([]VHostTotals, error) { return reply.LocalTotals, nil })
		})
	}
	stats := r.statsHere(ctx, vs)
	asked.Wait()
	out := make([]VHostTotals, len(vs))
	for i, v := range vs {
		out[i] = VHostTotals{VHost: v.name, Queues: len(stats[i]), Exchanges: len(v.Exchanges())}
		for _, st := range stats[i] {
			out[i].Add(VHostTotals{Messages: st.Messages, Ready: st.MessagesReady, Unacked: st.MessagesUnacknowledged})
		}
	}
	at := vhostIndexes(vs)
	for _, o := range others {
		if i, ok := at[o.VHost]; ok {
			out[i].Add(o)
		}
	}
	return out, unanswered
}

// localTotals answers opLocalTotals: the totals of this node's queues
// and exchanges of vhost (empty: any) that are not in the definition
// store, for each vhost that has some.
func (r *Registry) localTotals(vhost string) []VHostTotals {
	var out []VHostTotals
	for _, v := range r.vhostsOf(vhost) {
		t := VHostTotals{VHost: v.name}
		for _, q := range v.sortedQueues() {
			if !q.def.Durable && !q.elsewhere() { // not another node's exclusive one (exclusive_cluster.go)
				d := q.detail()
				t.Add(VHostTotals{Queues: 1, Messages: d.Messages, Ready: d.MessagesReady, Unacked: d.MessagesUnacknowledged})
			}
		}
		for _, x := range v.Exchanges() {
			if !x.Durable {
				t.Exchanges++
			}
		}
		if t != (VHostTotals{VHost: v.name}) {
			out = append(out, t)
		}
	}
	return out
}

// listedQueue is a queue in an opLocalQueues answer: its arguments in
// AMQP's table encoding, which keeps their field types.
type listedQueue struct {
	VHost      string        `json:"vhost"`
	Name       string        `json:"name"`
	Type       string        `json:"type"`
	Exclusive  bool          `json:"exclusive,omitempty"`
	AutoDelete bool          `json:"auto_delete,omitempty"`
	Args       []byte        `json:"args,omitempty"`
	Figures    servedFigures `json:"figures"`
}

// listedExchange is an exchange in an opLocalExchanges answer.
type listedExchange struct {
	VHost      string `json:"vhost"`
	Name       string `json:"name"`
	Type       string `json:"type"`
	AutoDelete bool   `json:"auto_delete,omitempty"`
	Internal   bool   `json:"internal,omitempty"`
	Args       []byte `json:"args,omitempty"`
}

// listedBinding is a binding in an opLocalBindings answer.
type listedBinding struct {
	VHost       string `json:"vhost"`
	Source      string `json:"source"`
	Destination string `json:"destination"`
	ToExchange  bool   `json:"to_exchange,omitempty"`
	Key         string `json:"key"`
	Args        []byte `json:"args,omitempty"`
}

// NodeQueue is a queue of another node that only that node has, with its
// figures there (its Node).
type NodeQueue struct {
	VHost string
	QueueStats
}

// NodeExchange is a transient exchange of another node, Node.
type NodeExchange struct {
	VHost string
	Node  int32
	ExchangeDef
}

// LocalQueuesElsewhere returns the transient and exclusive queues of the
// cluster's other nodes, of vhost, or named name (empty: any), each with
// its node's figures, and the nodes out of contact or that did not
// answer in time (left out). A single node has none.
func (r *Registry) LocalQueuesElsewhere(ctx context.Context, vhost, name string) ([]NodeQueue, []int32) {
	return fromOtherNodes(ctx, r, &clientsRequest{Op: opLocalQueues, VHost: vhost, Name: name}, r.decodeQueues)
}

// decodeQueues reads node's answer to opLocalQueues. The policy shown is
// this node's view of the vhost's policies, which are replicated.
func (r *Registry) decodeQueues(node int32, reply *clientsReply) ([]NodeQueue, error) {
	out := make([]NodeQueue, len(reply.Queues))
	for i, l := range reply.Queues {
		args, err := readTable(l.Args)
		if err != nil {
			return nil, err
		}
		st := QueueStats{QueueDetail: QueueDetail{Name: l.Name, Exclusive: l.Exclusive, AutoDelete: l.AutoDelete,
			Type: l.Type, Args: args, Node: node}}
		st.show(&l.Figures)
		if v := r.vhostNamed(l.VHost); v != nil {
			if p := v.policyFor(false, queueTypeOf(args), l.Name); p != nil {
				st.Policy, st.PolicyDefinition = p.Name, maps.Clone(p.Definition)
			}
		}
		out[i] = NodeQueue{VHost: l.VHost, QueueStats: st}
	}
	return out, nil
}

// listedLocalQueues answers opLocalQueues: this node's queues of vhost,
// or named name (empty: any), that are not in the definition store.
func (r *Registry) listedLocalQueues(vhost, name string) ([]listedQueue, error) {
	now := time.Now()
	var out []listedQueue
	for _, v := range r.vhostsOf(vhost) {
		for _, q := range v.sortedQueues() {
			if q.def.Durable || q.elsewhere() || name != "" && q.name != name {
				continue
			}
			args, err := amqpwire.AppendTable(nil, q.def.Args)
			if err != nil {
				return nil, err
			}
			st := q.statsAt(now)
			out = append(out, listedQueue{VHost: v.name, Name: q.name, Type: st.Type, Exclusive: st.Exclusive,
				AutoDelete: st.AutoDelete, Args: args, Figures: figuresOf(&st)})
		}
	}
	return out, nil
}

// ExchangesElsewhere returns the transient exchanges of the cluster's
// other nodes, of vhost, or named name (empty: any), and the nodes out of
// contact or that did not answer in time (left out).
func (r *Registry) ExchangesElsewhere(ctx context.Context, vhost, name string) ([]NodeExchange, []int32) {
	return fromOtherNodes(ctx, r, &clientsRequest{Op: opLocalExchanges, VHost: vhost, Name: name}, decodeExchanges)
}

// decodeExchanges reads node's answer to opLocalExchanges.
func decodeExchanges(node int32, reply *clientsReply) ([]NodeExchange, error) {
	out := make([]NodeExchange, len(reply.Exchanges))
	for i, l := range reply.Exchanges {
		args, err := readTable(l.Args)
		if err != nil {
			return nil, err
		}
		out[i] = NodeExchange{VHost: l.VHost, Node: node, ExchangeDef: ExchangeDef{Name: l.Name, Type: l.Type,
			AutoDelete: l.AutoDelete, Internal: l.Internal, Args: args}}
	}
	return out, nil
}

// listedLocalExchanges answers opLocalExchanges: this node's transient
// exchanges of vhost, or named name (empty: any).
func (r *Registry) listedLocalExchanges(vhost, name string) ([]listedExchange, error) {
	var out []listedExchange
	for _, v := range r.vhostsOf(vhost) {
		for _, x := range v.Exchanges() {
			if x.Durable || name != "" && x.Name != name {
				continue
			}
			args, err := amqpwire.AppendTable(nil, x.Args)
			if err != nil {
				return nil, err
			}
			out = append(out, listedExchange{VHost: v.name, Name: x.Name, Type: x.Type, AutoDelete: x.AutoDelete,
				Internal: x.Internal, Args: args})
		}
	}
	return out, nil
}

// vhostNamed returns the vhost name, nil if there is none.
func (r *Registry) vhostNamed(name string) *VHost {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.vhosts[name]
}

// vhostsOf returns the vhost name, or every vhost if name is empty.
func (r *Registry) vhostsOf(name string) []*VHost {
	if name != "" {
		if v := r.vhostNamed(name); v != nil {
			return []*VHost{v}
		}
		return nil
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*VHost, 0, len(r.vhosts))
	for _, v := range r.vhosts {
		out = append(out, v)
	}
	return out
}

// compareNodeQueues orders queues of one vhost by name, then node.
func compareNodeQueues(a, b QueueStats) int {
	return cmp.Or(compareStrings(a.Name, b.Name), cmp.Compare(a.Node, b.Node))
}

// askedVHost is the vhost a listing of vs asks the other nodes about:
// empty (any) unless it is of one vhost.
func askedVHost(vs []*VHost) string {
	if len(vs) == 1 {
		return vs[0].name
	}
	return ""
}

// vhostIndexes maps the name of each of vs to its index.
func vhostIndexes(vs []*VHost) map[string]int {
	at := make(map[string]int, len(vs))
	for i, v := range vs {
		at[v.name] = i
	}
	return at
}

// withQueuesElsewhere adds to out, the statistics of the queues of each
// of vs, the queues of others that only their node has, keeping each
// vhost's sorted.
func withQueuesElsewhere(vs []*VHost, out [][]QueueStats, others []NodeQueue) {
	if len(others) == 0 {
		return
	}
	at := vhostIndexes(vs)
	for _, o := range others {
		if i, ok := at[o.VHost]; ok {
			out[i] = append(out[i], o.QueueStats)
		}
	}
	for i := range out {
		slices.SortStableFunc(out[i], compareNodeQueues)
	}
}

// ExchangesOf returns, for each of vs, its exchanges sorted by name, the
// other nodes' transient ones among them, and the nodes that did not
// answer in time (theirs are missing).
func (r *Registry) ExchangesOf(ctx context.Context, vs []*VHost) ([][]ExchangeDef, []int32) {
	out := make([][]ExchangeDef, len(vs))
	for i, v := range vs {
		out[i] = v.Exchanges()
	}
	if len(vs) == 0 {
		return out, nil
	}
	others, unanswered := r.ExchangesElsewhere(ctx, askedVHost(vs), "")
	at := vhostIndexes(vs)
	for _, x := range others {
		if i, ok := at[x.VHost]; ok {
			out[i] = append(out[i], x.ExchangeDef)
		}
	}
	if len(others) > 0 {
		for i := range out {
			slices.SortStableFunc(out[i], func(a, b ExchangeDef) int { return compareStrings(a.Name, b.Name) })
		}
	}
	return out, unanswered
}

// AllBindings returns the vhost's bindings as RabbitMQ lists them: the
// default exchange's implicit ones (each queue by its name) first, then
// the declared ones (Bindings).
func (v *VHost) AllBindings() []BindingInfo {
	var out []BindingInfo
	for _, q := range v.Queues() {
		out = append(out, BindingInfo{Destination: q.Name, Key: q.Name})
	}
	return append(out, v.Bindings()...)
}

// BindingsOf returns, for each of vs, its bindings as AllBindings lists
// them, the other nodes' among them that only their node has (from or to
// its transient exchanges and queues, and the default exchange's to its
// transient queues), and the nodes that did not answer in time (theirs
// are missing).
func (r *Registry) BindingsOf(ctx context.Context, vs []*VHost) ([][]BindingInfo, []int32) {
	out := make([][]BindingInfo, len(vs))
	for i, v := range vs {
		out[i] = v.AllBindings()
	}
	if len(vs) == 0 {
		return out, nil
	}
	others, unanswered := r.BindingsElsewhere(ctx, askedVHost(vs))
	at := vhostIndexes(vs)
	for _, o := range others {
		if i, ok := at[o.VHost]; ok {
			out[i] = append(out[i], o.BindingInfo)
		}
	}
	if len(others) > 0 {
		// The default exchange's are first, named "": the order of
		// AllBindings, kept.
		for i := range out {
			slices.SortStableFunc(out[i], compareBindings)
		}
	}
	return out, unanswered
}

// compareBindings orders bindings by source, destination and key, as
// Bindings lists them.
func compareBindings(a, b BindingInfo) int {
	return cmp.Or(compareStrings(a.Source, b.Source), compareStrings(a.Destination, b.Destination),
		compareStrings(a.Key, b.Key))
}

// listedLocalBindings answers opLocalBindings: this node's bindings of
// vhost (empty: any) that are not in the definition store, with the
// default exchange's implicit ones to its queues that are not either.
// Those of its queues that are (durable and exclusive ones) every node
// has, and lists itself.
func (r *Registry) listedLocalBindings(vhost string) ([]listedBinding, error) {
	var out []listedBinding
	for _, v := range r.vhostsOf(vhost) {
		for _, q := range v.sortedQueues() {
			if !q.recorded() && !q.elsewhere() {
				out = append(out, listedBinding{VHost: v.name, Destination: q.name, Key: q.name})
			}
		}
		v.mu.RLock()
		for _, x := range v.exchanges {
			if x.bindings == nil {
				continue
			}
			for _, b := range x.bindings.Bindings() {
				rec, durable, _ := v.bindingRecordOf(x, b)
				if durable {
					continue
				}
				args, err := amqpwire.AppendTable(nil, b.Args)
				if err != nil {
					v.mu.RUnlock()
					return nil, err
				}
				out = append(out, listedBinding{VHost: v.name, Source: rec.Source, Destination: rec.Destination,
					ToExchange: rec.DestKind == destExchange, Key: rec.Key, Args: args})
			}
		}
		v.mu.RUnlock()
	}
	return out, nil
}
