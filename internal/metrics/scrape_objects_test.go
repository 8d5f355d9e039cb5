package metrics_test

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
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

// TestScrapeFollowsObjectsBetweenScrapes checks that the per-object
// families show what changed since the last scrape (the scrape reuses
// its buffers and snapshots): offsets that moved, a topic and a queue
// deleted, a group's sums per topic over two topics, and a queue name
// the text format must escape.
func TestScrapeFollowsObjectsBetweenScrapes(t *testing.T) {
	n := nodetest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := kafkaClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	for topic, partitions := range map[string]int32{"alpha": 3, "beta": 2} {
		if _, err := adm.CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	produce := func(topic string, partition int32, count int) {
		t.Helper()
		var recs []*kgo.Record
		for range count {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: partition, Value: []byte("v")})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce("alpha", 0, 4)
	produce("beta", 1, 6)
	commits := kadm.Offsets{}
	commits.Add(kadm.Offset{Topic: "alpha", Partition: 0, At: 1, LeaderEpoch: -1})
	commits.Add(kadm.Offset{Topic: "beta", Partition: 1, At: 2, LeaderEpoch: -1})
	commits.Add(kadm.Offset{Topic: "beta", Partition: 0, At: 0, LeaderEpoch: -1})
	if _, err := adm.CommitOffsets(ctx, "readers", commits); err != nil {
		t.Fatal(err)
	}
	ch := amqpChannel(t, n)
	const odd = "odd \"quoted\" \\ back\nslash"
	for _, q := range []string{"plain", odd} {
		if _, err := ch.QueueDeclare(q, false, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := ch.PublishWithContext(ctx, "", odd, false, false, amqp.Publishing{Body: []byte("m")}); err != nil {
		t.Fatal(err)
	}

	url := nodetest.HTTPURL(n) + "/metrics/per-object"
	m := waitFor(t, url, "rabbitmq_queue_messages_ready", 1, "queue="+odd, "vhost=/")
	expect(t, m, []sample{
		{"kafka_topic_partitions", []string{"topic=alpha"}, 3},
		{"kafka_topic_partition_current_offset", []string{"topic=alpha", "partition=0"}, 4},
		{"kafka_topic_partition_current_offset", []string{"topic=beta", "partition=1"}, 6},
		{"kafka_consumergroup_lag", []string{"consumergroup=readers", "topic=alpha", "partition=0"}, 3},
		{"kafka_consumergroup_lag_sum", []string{"consumergroup=readers", "topic=alpha"}, 3},
		{"kafka_consumergroup_lag_sum", []string{"consumergroup=readers", "topic=beta"}, 4},
		{"kafka_consumergroup_current_offset_sum", []string{"consumergroup=readers", "topic=beta"}, 2},
		{"rabbitmq_queues", nil, 2},
		{"rabbitmq_queue_messages_ready", []string{"queue=plain", "vhost=/"}, 0},
	})

	if _, err := adm.DeleteTopic(ctx, "alpha"); err != nil {
		t.Fatal(err)
	}
	produce("beta", 1, 3)
	if _, err := ch.QueueDelete("plain", false, false, false); err != nil {
		t.Fatal(err)
	}
	m = waitFor(t, url, "kafka_topic_partition_current_offset", 9, "topic=beta", "partition=1")
	expect(t, m, []sample{
		{"kafka_topic_partitions", []string{"topic=alpha"}, -1},
		{"kafka_topic_partition_current_offset", []string{"topic=alpha", "partition=0"}, -1},
		{"kafka_consumergroup_lag_sum", []string{"consumergroup=readers", "topic=beta"}, 7},
		{"rabbitmq_queues", nil, 1},
		{"rabbitmq_queue_messages_ready", []string{"queue=plain", "vhost=/"}, -1},
		{"rabbitmq_queue_messages", []string{"queue=" + odd, "vhost=/"}, 1},
	})
}

type sample struct {
	family string
	labels []string
	want   float64 // -1: absent
}

func expect(t *testing.T, m map[string]*dto.MetricFamily, samples []sample) {
	t.Helper()
	for _, s := range samples {
		if got := value(m, s.family, s.labels...); got != s.want {
			t.Errorf("%s%q = %v, want %v", s.family, s.labels, got, s.want)
		}
	}
}

// waitFor scrapes url until family{labels} has value want (what the test
// did may take effect after the client's call returned), and returns the
// last scrape.
func waitFor(t *testing.T, url, family string, want float64, labels ...string) map[string]*dto.MetricFamily {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		m := scrape(t, url)
		if value(m, family, labels...) == want || time.Now().After(deadline) {
			return m
		}
	}
}

// TestScrapeNegotiatesGzip checks the page is the text format, gzipped
// only for a client that accepts gzip, as promhttp's was.
func TestScrapeNegotiatesGzip(t *testing.T) {
	n := nodetest.Start(t)
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	for _, c := range []struct {
		acceptEncoding string
		gzipped        bool
	}{
		{"", false},
		{"gzip", true},
		{"deflate, gzip;q=0.5", true},
		{"gzip;q=0", false},
		{"identity", false},
	} {
		req, err := http.NewRequest(http.MethodGet, nodetest.HTTPURL(n)+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.acceptEncoding != "" {
			req.Header.Set("Accept-Encoding", c.acceptEncoding)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body io.Reader = resp.Body
		if gzipped := resp.Header.Get("Content-Encoding") == "gzip"; gzipped != c.gzipped {
			t.Errorf("Accept-Encoding %q: Content-Encoding %q", c.acceptEncoding, resp.Header.Get("Content-Encoding"))
		} else if gzipped {
			if body, err = gzip.NewReader(resp.Body); err != nil {
				t.Fatal(err)
			}
		}
		if ct := resp.Header.Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8; escaping=underscores" {
			t.Errorf("Content-Type %q", ct)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(body)
		resp.Body.Close()
		if err != nil || families["kafka_brokers"] == nil {
			t.Errorf("Accept-Encoding %q: page does not parse (%v) or lacks kafka_brokers", c.acceptEncoding, err)
		}
	}
}

// TestConcurrentScrapesWhileObjectsChange scrapes both pages from several
// goroutines while topics and queues come and go (run with -race: the
// scrapes share pooled buffers and read objects being deleted); every
// page must parse.
func TestConcurrentScrapesWhileObjectsChange(t *testing.T) {
	n := nodetest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(kafkaClient(t, n))
	ch := amqpChannel(t, n)

	done := make(chan struct{})
	var scrapers sync.WaitGroup
	for i := range 4 {
		url := nodetest.HTTPURL(n) + []string{"/metrics", "/metrics/per-object"}[i%2]
		scrapers.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				if _, err := fetchFamilies(url); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for i := range 10 {
		name := fmt.Sprintf("churn-%d", i)
		if _, err := adm.CreateTopic(ctx, 4, 1, nil, name); err != nil {
			t.Error(err)
			break
		}
		if _, err := ch.QueueDeclare(name, false, false, false, false, nil); err != nil {
			t.Error(err)
			break
		}
		if i%2 == 0 {
			if _, err := adm.DeleteTopic(ctx, name); err != nil {
				t.Error(err)
				break
			}
			if _, err := ch.QueueDelete(name, false, false, false); err != nil {
				t.Error(err)
				break
			}
		}
	}
	close(done)
	scrapers.Wait()
	m := scrape(t, nodetest.HTTPURL(n)+"/metrics/per-object")
	expect(t, m, []sample{
		{"rabbitmq_queues", nil, 5},
		{"kafka_topic_partitions", []string{"topic=churn-9"}, 4},
		{"kafka_topic_partitions", []string{"topic=churn-8"}, -1},
	})
}

// kafkaClient is a franz-go client of n, closed with the test.
func kafkaClient(t *testing.T, n *node.Node, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(n.KafkaAddr())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// amqpChannel is a channel on a new connection to n, closed with the test.
func amqpChannel(t *testing.T, n *node.Node) *amqp.Channel {
	t.Helper()
	conn, err := amqp.Dial(nodetest.AMQPURL(n))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return ch
}
