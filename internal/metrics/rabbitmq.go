package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/wharf-mq/wharf/internal/amqp"
)

// rabbitmq_prometheus's metrics that Wharf has the data for, with its
// names and meanings.
var (
	rabbitBuild    = prometheus.NewDesc("rabbitmq_build_info", "RabbitMQ & Erlang/OTP version info", []string{"rabbitmq_version", "product"}, nil)
	rabbitConns    = prometheus.NewDesc("rabbitmq_connections", "Connections currently open", nil, nil)
	rabbitChannels = prometheus.NewDesc("rabbitmq_channels", "Channels currently open", nil, nil)
	rabbitConsumer = prometheus.NewDesc("rabbitmq_consumers", "Consumers currently connected", nil, nil)

	rabbitDiskFree  = prometheus.NewDesc("rabbitmq_disk_space_available_bytes", "Disk space available in bytes", nil, nil)
	rabbitDiskLimit = prometheus.NewDesc("rabbitmq_disk_space_available_limit_bytes", "Free disk space low watermark in bytes", nil, nil)
	rabbitMemLimit  = prometheus.NewDesc("rabbitmq_resident_memory_limit_bytes", "Memory high watermark in bytes", nil, nil)
	alarmMemory     = prometheus.NewDesc("rabbitmq_alarms_memory_limit", "is 1 if memory alarm is in effect", nil, nil)
	alarmDisk       = prometheus.NewDesc("rabbitmq_alarms_disk_limit", "is 1 if disk alarm is in effect", nil, nil)
	alarmFDs        = prometheus.NewDesc("rabbitmq_alarms_file_descriptor_limit", "is 1 if file descriptor limit alarm is in effect", nil, nil)
)

// globalCounters map the AMQP front end's message counters (RabbitMQ's
// message_stats names) to rabbitmq_prometheus's global counters.
var globalCounters = map[string]*prometheus.Desc{
	"publish":           prometheus.NewDesc("rabbitmq_global_messages_received_total", "Total number of messages received from publishers", nil, nil),
	"confirm":           prometheus.NewDesc("rabbitmq_global_messages_confirmed_total", "Total number of messages confirmed to publishers", nil, nil),
	"deliver_get":       prometheus.NewDesc("rabbitmq_global_messages_delivered_total", "Total number of messages delivered to consumers", nil, nil),
	"redeliver":         prometheus.NewDesc("rabbitmq_global_messages_redelivered_total", "Total number of messages redelivered to consumers", nil, nil),
	"ack":               prometheus.NewDesc("rabbitmq_global_messages_acknowledged_total", "Total number of messages acknowledged by consumers", nil, nil),
	"get_empty":         prometheus.NewDesc("rabbitmq_global_messages_get_empty_total", "Total number of times basic.get operations fetched no message", nil, nil),
	"drop_unroutable":   prometheus.NewDesc("rabbitmq_global_messages_unroutable_dropped_total", "Total number of messages published as non-mandatory into an exchange and dropped as unroutable", nil, nil),
	"return_unroutable": prometheus.NewDesc("rabbitmq_global_messages_unroutable_returned_total", "Total number of messages published as mandatory into an exchange and returned to the publisher as unroutable", nil, nil),
}

// rabbitCollector reads the AMQP side at scrape time, but for the
// queues (queues.go).
type rabbitCollector struct {
	src      Sources
	identity *prometheus.Desc
}

func newRabbitCollector(src Sources) *rabbitCollector {
	c := &rabbitCollector{src: src}
	c.identity = prometheus.NewDesc("rabbitmq_identity_info", "RabbitMQ node & cluster identity info", nil, prometheus.Labels{
		"rabbitmq_node": src.NodeName, "rabbitmq_cluster": src.ClusterName, "rabbitmq_cluster_permanent_id": src.Broker.ClusterID(),
	})
	return c
}

func (c *rabbitCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.identity, rabbitBuild, rabbitConns, rabbitChannels, rabbitConsumer,
		rabbitDiskFree, rabbitDiskLimit, rabbitMemLimit, alarmMemory, alarmDisk, alarmFDs} {
		ch <- d
	}
	for _, d := range globalCounters {
		ch <- d
	}
}

func (c *rabbitCollector) Collect(ch chan<- prometheus.Metric) {
	gauge(ch, c.identity, 1)
	gauge(ch, rabbitBuild, 1, c.src.Version, "Wharf")
	var conns []amqp.ConnectionInfo
	var res amqp.Resources
	if c.src.AMQP != nil {
		conns, res = c.src.AMQP.Connections(), c.src.AMQP.Resources()
		for _, st := range c.src.AMQP.MessageStats() {
			if d, ok := globalCounters[st.Name]; ok {
				counter(ch, d, float64(st.Value))
			}
		}
	}
	channels, consumers := 0, 0
	for _, conn := range conns {
		channels += len(conn.Channels)
		for _, chInfo := range conn.Channels {
			consumers += len(chInfo.Consumers)
		}
	}
	gauge(ch, rabbitConns, float64(len(conns)))
	gauge(ch, rabbitChannels, float64(channels))
	gauge(ch, rabbitConsumer, float64(consumers))
	if free := freeDiskBytes(c.src.Broker.DataDir()); free >= 0 {
		gauge(ch, rabbitDiskFree, float64(free))
	}
	gauge(ch, rabbitDiskLimit, float64(max(res.DiskFreeLimit, 0)))
	gauge(ch, rabbitMemLimit, float64(max(res.MemoryLimit, 0)))
	gauge(ch, alarmMemory, boolValue(res.MemoryAlarm))
	gauge(ch, alarmDisk, boolValue(res.DiskAlarm))
	gauge(ch, alarmFDs, 0) // running out of descriptors backs the listeners off instead (netserve)
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
