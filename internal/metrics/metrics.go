// Package metrics serves Wharf's Prometheus metrics under the names users
// already alert on: kafka_exporter's for topics, partitions and consumer
// groups (kafka.go), rabbitmq_prometheus's for queues, connections,
// channels and alarms (rabbitmq.go), and Wharf's own: request latency per
// Kafka API and per AMQP method, fsync latency and group-commit batch
// size (storage.go), bytes in and out per topic (kafka.go), open files
// (the process collector) and disk free (rabbitmq.go).
//
// Collection is lazy: the broker keeps only atomic counters and the
// histograms' buckets; everything else is read from the broker, the group
// coordinator and the queues when Prometheus scrapes, so a broker that is
// not scraped pays nothing for them, however many partitions and queues
// it has. A scrape reads each object under the object's own short locks,
// holds no broker-wide lock across the scrape, and writes the families
// with one sample per object directly in the text format, on the
// scraping goroutine alone (page.go says why). /metrics sums queue
// metrics over the node, as rabbitmq_prometheus does by default;
// /metrics/per-object labels them per queue.
//
// In a cluster every node serves its own metrics, and each reports what
// it holds, so that Prometheus scrapes every node and sums: a queue on
// the node serving it (a classic queue's home, a quorum queue's leader),
// a partition on each node holding a replica of it (offsets as that
// replica has them, leader and in-sync replicas as that node sees them),
// a consumer group on the node coordinating it.
package metrics

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/amqp"
	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/group"
	"github.com/wharf-mq/wharf/internal/mq"
	"github.com/wharf-mq/wharf/internal/rate"
)

// AMQP is what the metrics read of the AMQP front end; *amqp.Server
// implements it.
type AMQP interface {
	Connections() []amqp.ConnectionInfo
	MessageStats() []rate.Stat
	Resources() amqp.Resources
}

// Sources are what the metrics are read from.
type Sources struct {
	Broker *broker.Broker
	// Groups returns the node's group coordinator, nil while it has
	// none open (a cluster node opens its own once the cluster has a
	// quorum): its groups are then left out.
	Groups func() *group.Coordinator
	Queues *mq.Registry
	// AMQP is nil when the node has no AMQP listener: its metrics are
	// then zero.
	AMQP AMQP
	// NodeName and ClusterName label rabbitmq_identity_info; Version
	// labels the build info.
	NodeName, ClusterName, Version string
}

// latencyBuckets are the request, method and fsync latency buckets, in
// seconds: from 100 µs, where a loopback request or a fast fsync lies, to
// 10 s.
var latencyBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Metrics is one node's metrics: two pages (node-wide sums and per
// object) over the same registry, and the latency histograms the front
// ends feed.
type Metrics struct {
	aggregated, perObject *page

	kafkaLatency *prometheus.HistogramVec
	// kafkaByKey caches kafkaLatency's child per API key, so observing
	// costs no lookup after the first request of a kind.
	kafkaByKey  [kmsg.MaxKey + 1]atomic.Pointer[prometheus.Observer]
	amqpLatency *prometheus.HistogramVec
	amqpByID    sync.Map // amqpwire.MethodID -> prometheus.Observer
}

// New builds the metrics of a node.
func New(src Sources) *Metrics {
	m := &Metrics{
		kafkaLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "wharf_kafka_request_duration_seconds",
			Help:    "Time from a Kafka request's arrival to its response being written, per API (Kafka's request TotalTimeMs).",
			Buckets: latencyBuckets,
		}, []string{"api"}),
		amqpLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "wharf_amqp_method_duration_seconds",
			Help:    "Time the broker took to handle an AMQP method a client sent, per method (publisher confirms are not waited for).",
			Buckets: latencyBuckets,
		}, []string{"method"}),
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.kafkaLatency, m.amqpLatency, storageMetrics(), newRabbitCollector(src),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.aggregated = &page{registry: reg, src: src}
	m.perObject = &page{registry: reg, src: src, perObject: true}
	return m
}

// Handler serves /metrics: queue metrics summed over the node.
func (m *Metrics) Handler() http.Handler { return m.aggregated }

// PerObjectHandler serves /metrics/per-object: queue metrics per queue,
// labelled vhost and queue, as rabbitmq_prometheus's.
func (m *Metrics) PerObjectHandler() http.Handler { return m.perObject }

// ObserveKafkaRequest records one answered Kafka request (a
// kafka.RequestObserver).
func (m *Metrics) ObserveKafkaRequest(apiKey int16, elapsed time.Duration) {
	if apiKey < 0 || int(apiKey) >= len(m.kafkaByKey) {
		return
	}
	slot := &m.kafkaByKey[apiKey]
	o := slot.Load()
	if o == nil {
		child := m.kafkaLatency.WithLabelValues(kmsg.NameForKey(apiKey))
		o = &child
		slot.Store(o)
	}
	(*o).Observe(elapsed.Seconds())
}

// ObserveAMQPMethod records one handled AMQP method (an
// amqp.MethodObserver).
func (m *Metrics) ObserveAMQPMethod(id amqpwire.MethodID, elapsed time.Duration) {
	o, ok := m.amqpByID.Load(id)
	if !ok {
		o, _ = m.amqpByID.LoadOrStore(id, m.amqpLatency.WithLabelValues(amqpwire.MethodName(id)))
	}
	o.(prometheus.Observer).Observe(elapsed.Seconds())
}

// gauge sends one gauge sample.
func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

// counter sends one counter sample.
func counter(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
}
