package node

import (
	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/console"
	"github.com/wharf-mq/wharf/internal/kafkaview"
	"github.com/wharf-mq/wharf/internal/metrics"
	"github.com/wharf-mq/wharf/internal/mq"
)

// addManagement puts beside RabbitMQ's API on the HTTP listener what is
// Wharf's own: the Kafka endpoints (/api/kafka/), the Prometheus metrics
// (/metrics and /metrics/per-object, with the Kafka and AMQP front ends'
// latency observers) and the web console (/). The metrics, like
// rabbitmq_prometheus's and kafka_exporter's, need no login; the console's
// page needs none either, and its calls to /api/ log in as the API does.
// A cluster node serves them too: the Kafka view and the group metrics
// read whichever group coordinator the node has open (none until
// openClusterCoordinators opens it), and the per-queue metrics count only
// the queues this node serves (internal/metrics, queues.go). Call once the
// servers exist, before the HTTP listener serves.
func (n *Node) addManagement(b *broker.Broker, queues *mq.Registry) {
	n.httpServer.ServeKafka(kafkaview.New(b, n.groups.Load))
	cluster, nodeName := n.httpServer.Identity()
	src := metrics.Sources{
		Broker: b, Groups: n.groups.Load, Queues: queues,
		NodeName: nodeName, ClusterName: cluster, Version: n.httpServer.Version(),
	}
	if n.amqpServer != nil {
		src.AMQP = n.amqpServer
	}
	m := metrics.New(src)
	n.httpServer.Mount("/metrics", m.Handler())
	n.httpServer.Mount("/metrics/per-object", m.PerObjectHandler())
	n.kafkaServer.ObserveRequests(m.ObserveKafkaRequest)
	if n.amqpServer != nil {
		n.amqpServer.ObserveMethods(m.ObserveAMQPMethod)
	}
	n.httpServer.Mount("/", console.Handler())
}
