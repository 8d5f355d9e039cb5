package metrics_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wharf-mq/wharf/internal/node"
	"github.com/wharf-mq/wharf/internal/nodetest"
)

// scrape reads one metrics page and parses it as Prometheus does.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	families, err := fetchFamilies(url)
	if err != nil {
		t.Fatal(err)
	}
	return families
}

func fetchFamilies(url string) (map[string]*dto.MetricFamily, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s does not parse: %v", url, err)
	}
	return families, nil
}

// value is the sample of family whose labels include labels ("k=v"
// pairs), or -1; a histogram's value is its sample count.
func value(families map[string]*dto.MetricFamily, family string, labels ...string) float64 {
	f := families[family]
	if f == nil {
		return -1
	}
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for _, kv := range labels {
			k, v, _ := strings.Cut(kv, "=")
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue()
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		case m.Untyped != nil:
			return m.GetUntyped().GetValue()
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	return -1
}

// TestScrapeAfterWorkload runs a scripted workload through real clients
// (franz-go: a topic, records, a group that consumes some of them; amqp091:
// queues, messages ready and unacknowledged, a consumer) and checks that
// /metrics and /metrics/per-object parse and carry kafka_exporter's and
// rabbitmq_prometheus's names with the values the workload left, and
// Wharf's own latency, fsync and bytes metrics.
func TestScrapeAfterWorkload(t *testing.T) {
	n := nodetest.Start(t, nodetest.WithConfig(func(c *node.Config) { c.Groups.InitialRebalanceDelay = -1 }))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := range 10 {
		recs = append(recs, &kgo.Record{Topic: "orders", Partition: int32(i % 2), Value: []byte("0123456789")})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.DeleteRecords(ctx, kadm.Offsets{"orders": {1: {Topic: "orders", Partition: 1, At: 2}}}); err != nil {
		t.Fatal(err)
	}
	// Group billing has read 3 of partition 0's 5 records and 5 of
	// partition 1's.
	commits := kadm.Offsets{}
	commits.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 3, LeaderEpoch: -1})
	commits.Add(kadm.Offset{Topic: "orders", Partition: 1, At: 5, LeaderEpoch: -1})
	if _, err := adm.CommitOffsets(ctx, "billing", commits); err != nil {
		t.Fatal(err)
	}
	fetcher, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer fetcher.Close()
	for got := 0; got < 8; {
		got += fetcher.PollFetches(ctx).NumRecords()
	}

	conn, err := amqp.Dial(nodetest.AMQPURL(n))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Channel(); err != nil { // a second, idle channel
		t.Fatal(err)
	}
	for _, q := range []string{"jobs", "mail"} {
		if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		q := []string{"jobs", "mail"}[i%2] // jobs gets 3, mail 2
		if err := ch.PublishWithContext(ctx, "", q, false, false, amqp.Publishing{Body: []byte("m")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := ch.Qos(1, 0, false); err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch.Consume("jobs", "worker", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-deliveries // one unacknowledged in jobs, held by the prefetch of 1

	base := nodetest.HTTPURL(n)
	var m map[string]*dto.MetricFamily
	deadline := time.Now().Add(10 * time.Second)
	for {
		m = scrape(t, base+"/metrics")
		if value(m, "rabbitmq_queue_messages_unacked") == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, c := range []struct {
		family string
		labels []string
		want   float64
	}{
		{"kafka_brokers", nil, 1},
		{"kafka_topic_partitions", []string{"topic=orders"}, 2},
		{"kafka_topic_partition_current_offset", []string{"topic=orders", "partition=0"}, 5},
		{"kafka_topic_partition_oldest_offset", []string{"topic=orders", "partition=1"}, 2},
		{"kafka_topic_partition_replicas", []string{"topic=orders", "partition=1"}, 1},
		{"kafka_topic_partition_under_replicated_partition", []string{"topic=orders", "partition=1"}, 0},
		{"kafka_consumergroup_current_offset", []string{"consumergroup=billing", "topic=orders", "partition=0"}, 3},
		{"kafka_consumergroup_lag", []string{"consumergroup=billing", "topic=orders", "partition=0"}, 2},
		{"kafka_consumergroup_lag", []string{"consumergroup=billing", "topic=orders", "partition=1"}, 0},
		{"kafka_consumergroup_lag_sum", []string{"consumergroup=billing", "topic=orders"}, 2},
		{"kafka_consumergroup_current_offset_sum", []string{"consumergroup=billing", "topic=orders"}, 8},
		{"kafka_consumergroup_members", []string{"consumergroup=billing"}, 0},
		{"rabbitmq_queues", nil, 2},
		{"rabbitmq_queue_messages_ready", nil, 4},
		{"rabbitmq_queue_messages_unacked", nil, 1},
		{"rabbitmq_queue_messages", nil, 5},
		{"rabbitmq_queue_consumers", nil, 1},
		{"rabbitmq_connections", nil, 1},
		{"rabbitmq_channels", nil, 2},
		{"rabbitmq_consumers", nil, 1},
		{"rabbitmq_global_messages_received_total", nil, 5},
		{"rabbitmq_alarms_memory_limit", nil, 0},
		{"rabbitmq_alarms_disk_limit", nil, 0},
		{"rabbitmq_identity_info", nil, 1},
	} {
		if got := value(m, c.family, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.family, c.labels, got, c.want)
		}
	}
	// Ten records of 10-byte values in two batches: more than the
	// values, and fetched at least once each.
	if in, out := value(m, "wharf_topic_bytes_in_total", "topic=orders"), value(m, "wharf_topic_bytes_out_total", "topic=orders"); in < 100 || out < in-2*61 {
		t.Errorf("bytes in %v, out %v", in, out)
	}
	for _, c := range []struct {
		family string
		labels []string
	}{
		{"wharf_kafka_request_duration_seconds", []string{"api=Produce"}},
		{"wharf_kafka_request_duration_seconds", []string{"api=Fetch"}},
		{"wharf_amqp_method_duration_seconds", []string{"method=queue.declare"}},
		{"wharf_amqp_method_duration_seconds", []string{"method=basic.publish"}},
		{"wharf_fsync_duration_seconds", nil},
		{"wharf_group_commit_offsets", nil},
	} {
		if got := value(m, c.family, c.labels...); got < 1 {
			t.Errorf("histogram %s%v has %v samples", c.family, c.labels, got)
		}
	}
	for _, f := range []string{"process_open_fds", "process_max_fds", "rabbitmq_disk_space_available_bytes"} {
		if value(m, f) <= 0 {
			t.Errorf("%s = %v", f, value(m, f))
		}
	}

	perObject := scrape(t, base+"/metrics/per-object")
	for q, want := range map[string][2]float64{"jobs": {2, 1}, "mail": {2, 0}} {
		ready := value(perObject, "rabbitmq_queue_messages_ready", "vhost=/", "queue="+q)
		unacked := value(perObject, "rabbitmq_queue_messages_unacked", "vhost=/", "queue="+q)
		if ready != want[0] || unacked != want[1] {
			t.Errorf("per-object %s: ready %v, unacked %v; want %v", q, ready, unacked, want)
		}
	}
	if value(perObject, "kafka_topic_partition_current_offset", "topic=orders", "partition=1") != 5 {
		t.Error("per-object scrape lacks the Kafka metrics")
	}
}
