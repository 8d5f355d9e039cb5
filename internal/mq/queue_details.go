package mq

import (
	"maps"
	"slices"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// QueueDetail is what the management API shows of a queue.
type QueueDetail struct {
	Name                           string
	Durable, Exclusive, AutoDelete bool
	// Type is classic, quorum or stream.
	Type string
	Args amqpwire.Table // as declared (a copy)
	// Messages counts ready and unacknowledged messages; MessagesReady
	// and MessagesUnacknowledged split it.
	Messages, MessagesReady, MessagesUnacknowledged int
	Consumers                                       int
	// Policy is the name of the policy that applies, "" if none, and
	// PolicyDefinition its definition.
	Policy           string
	PolicyDefinition map[string]any
	// State is RabbitMQ's queue state: "running", "crashed" for a
	// queue whose storage failed (out of service, see crash.go), or
	// "down" for one served on a node that did not give its figures
	// (queue_stats_cluster.go).
	State string
	// Members are a quorum queue's nodes in a cluster, and Leader the
	// one leading its group as this node last heard (0 if it knows of
	// none): RabbitMQ's "members" and "leader".
	Members []int32
	Leader  int32
	// Target is the members a grow or shrink in progress moves to (nil
	// if none is), and Online the members this node is in contact with
	// (RabbitMQ's "online").
	Target, Online []int32
	// Node is the cluster node the queue is served on: a classic queue's
	// home, a quorum queue's leader (0 on a single node, or for a quorum
	// queue whose leader this node does not know).
	Node int32
}

// typeName is the x-queue-type name.
func (t queueType) typeName() string {
	switch t {
	case quorumQueue:
		return "quorum"
	case streamQueue:
		return "stream"
	}
	return "classic"
}

// QueueDetails returns the details of every queue, sorted by name.
func (v *VHost) QueueDetails() []QueueDetail {
	qs := v.sortedQueues()
	out := make([]QueueDetail, 0, len(qs))
	for _, q := range qs {
		out = append(out, q.detail())
	}
	return out
}

// sortedQueues returns the vhost's queues, sorted by name.
func (v *VHost) sortedQueues() []*queue {
	v.mu.RLock()
	qs := make([]*queue, 0, len(v.queues))
	for _, q := range v.queues {
		qs = append(qs, q)
	}
	v.mu.RUnlock()
	slices.SortFunc(qs, func(a, b *queue) int { return compareStrings(a.name, b.name) })
	return qs
}

// QueueDetail returns one queue's details, or a 404 *Error.
func (v *VHost) QueueDetail(name string) (QueueDetail, error) {
	q, err := v.lookupQueue(name)
	if err != nil {
		return QueueDetail{}, err
	}
	return q.detail(), nil
}

func (q *queue) detail() QueueDetail {
	d := QueueDetail{
		Name: q.name, Durable: q.def.Durable, Exclusive: q.def.Exclusive, AutoDelete: q.def.AutoDelete,
		Type: q.opts.kind.typeName(), Args: maps.Clone(q.def.Args), State: "running",
	}
	if q.crashed.Load() {
		d.State = "crashed"
	}
	d.Node = q.r.nodeID()
	if home := q.home.Load(); home > 0 {
		d.Node = home
	}
	if ms := q.membership.Load(); ms != nil {
		d.Members, d.Target, d.Leader = slices.Clone(ms.Members), slices.Clone(ms.Target), q.shownLeader(ms)
		d.Online, d.Node = q.r.inContact(ms.Members), d.Leader
	}
	q.mu.Lock()
	d.MessagesReady, d.MessagesUnacknowledged, d.Consumers = q.ready.Len(), len(q.unacked), len(q.consumers)
	q.mu.Unlock()
	if q.stream != nil {
		d.MessagesReady = q.streamLength()
	}
	d.Messages = d.MessagesReady + d.MessagesUnacknowledged
	if p := q.vh.policyFor(false, q.opts.kind, q.name); p != nil {
		d.Policy, d.PolicyDefinition = p.Name, maps.Clone(p.Definition)
	}
	return d
}
