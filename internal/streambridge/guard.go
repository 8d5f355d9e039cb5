package streambridge

import (
	"sync/atomic"

	"github.com/wharf-mq/wharf/internal/mq"
)

// Guard answers the Kafka core's question which topics stream queues own
// (broker.Config.TopicInUse). The Kafka core opens first (the queueing
// core needs its topics and its definition store), so a Guard starts with
// no registry, owning nothing, and the node attaches the registry once it
// is open, before any listener serves.
type Guard struct{ queues atomic.Pointer[mq.Registry] }

// Attach makes g answer from r's stream queues.
func (g *Guard) Attach(r *mq.Registry) { g.queues.Store(r) }

// TopicInUse names the stream queue whose log topic is, as "queue 'q' in
// vhost 'v'", if one is declared.
func (g *Guard) TopicInUse(topic string) (queue string, inUse bool) {
	r := g.queues.Load()
	if r == nil {
		return "", false
	}
	return r.StreamQueueOf(topic)
}
