package metrics

import (
	"github.com/wharf-mq/wharf/internal/mq"
)

// queueSample is what one scrape read of a queue.
type queueSample struct {
	vhost, name               string
	ready, unacked, consumers int
}

// queueFamilies are rabbitmq_prometheus's per-queue gauges, summed over
// the node on /metrics and labelled per queue on /metrics/per-object.
var queueFamilies = []struct {
	name, help string
	value      func(queueSample) int64
}{
	{"rabbitmq_queue_messages_ready", "Messages ready to be delivered to consumers",
		func(q queueSample) int64 { return int64(q.ready) }},
	{"rabbitmq_queue_messages_unacked", "Messages delivered to consumers but not yet acknowledged",
		func(q queueSample) int64 { return int64(q.unacked) }},
	{"rabbitmq_queue_messages", "Sum of ready and unacknowledged messages - total queue depth",
		func(q queueSample) int64 { return int64(q.ready + q.unacked) }},
	{"rabbitmq_queue_consumers", "Consumers on a queue",
		func(q queueSample) int64 { return int64(q.consumers) }},
}

// writeQueues reads every queue into s and writes how many there are and
// their depths and consumers, per queue or summed.
func writeQueues(e *exposition, queues *mq.Registry, perObject bool, s *scratch) {
	s.readQueues(queues)
	e.family("rabbitmq_queues", "Queues available", "gauge")
	e.sample("rabbitmq_queues", int64(len(s.queues)))
	for _, f := range queueFamilies {
		if !perObject {
			var sum int64
			for _, q := range s.queues {
				sum += f.value(q)
			}
			e.family(f.name, f.help, "gauge")
			e.sample(f.name, sum)
			continue
		}
		if len(s.queues) == 0 {
			continue
		}
		e.family(f.name, f.help, "gauge")
		for _, q := range s.queues {
			e.begin(f.name)
			e.label("queue", q.name)
			e.label("vhost", q.vhost)
			e.end(f.value(q))
		}
	}
}

// readQueues fills s.queues, by vhost and name, with the queues this
// node serves: in a cluster a classic queue is counted by its home node
// and a quorum queue by its leader (by no node, while this node knows
// none), as rabbitmq_prometheus counts each queue on the node
// hosting its process, so that summing the nodes counts every queue once.
// A vhost deleted meanwhile is left out.
func (s *scratch) readQueues(queues *mq.Registry) {
	self := queues.NodeID() // 0 on a single node, where every queue is served
	for _, vhost := range queues.VHosts() {
		v, err := queues.VHost(vhost)
		if err != nil {
			continue
		}
		for _, q := range v.QueueDetails() {
			if self != 0 && q.Node != self {
				continue
			}
			s.queues = append(s.queues, queueSample{vhost: vhost, name: q.Name, ready: q.MessagesReady, unacked: q.MessagesUnacknowledged, consumers: q.Consumers})
		}
	}
}
