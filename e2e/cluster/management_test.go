package cluster

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wharf-mq/wharf/internal/nodetest"
)

// scrape is one GET of a node's /metrics: its family names (from the
// # TYPE lines) and its unlabelled samples by name.
type scrape struct {
	families []string
	samples  map[string]float64
	text     string
}

// scrapeMetrics GETs url (a node's /metrics), as Prometheus does: no
// login.
func scrapeMetrics(ctx context.Context, url string) (scrape, error) {
	s := scrape{samples: map[string]float64{}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return s, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return s, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	var text strings.Builder
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(nil, 1<<20)
	for lines.Scan() {
		line := lines.Text()
		text.WriteString(line + "\n")
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			s.families = append(s.families, strings.Fields(rest)[0])
			continue
		}
		if name, value, ok := strings.Cut(line, " "); ok && !strings.HasPrefix(line, "#") && !strings.Contains(name, "{") {
			if v, err := strconv.ParseFloat(value, 64); err == nil {
				s.samples[name] = v
			}
		}
	}
	s.text = text.String()
	return s, lines.Err()
}

// TestManagementOnEveryNode: three `wharf serve` processes each serve
// /metrics, as every node of a RabbitMQ or Kafka cluster answers
// Prometheus, with every family a single node's /metrics has; a classic
// queue (declared on node 2) and a quorum queue (declared on node 1) are
// each counted by exactly one node, the one serving it, so
// rabbitmq_queues summed over the nodes is 2; every node's
// /api/kafka/topics/{topic} shows a topic the moment it was created
// through node 3, /api/kafka/topics lists it, and /metrics shows
// the topic's partition with its three replicas in sync; and offsets a
// group commits through node 1 show, in /api/kafka/groups and the
// kafka_consumergroup_* metrics, on the one node coordinating the group.
func TestManagementOnEveryNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	nodes := startAPICluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()

	single, err := scrapeMetrics(ctx, nodetest.HTTPURL(nodetest.Start(t))+"/metrics")
	if err != nil {
		t.Fatal(err)
	}

	if _, err := channel(t, dialAMQP(t, nodes[1].amqp)).QueueDeclare("mgmt-classic", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := channel(t, dialAMQP(t, nodes[0].amqp)).QueueDeclare("mgmt-quorum", true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	const topic, groupName = "mgmt-topic", "mgmt-group"
	if _, err := newAdmin(t, []string{nodes[2].kafkaAddr}).CreateTopic(ctx, 1, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	for _, a := range nodes { // at once: a node that has not applied the topic yet catches up on the miss
		var detail struct{ Partitions int }
		if err := a.getAPI(ctx, "/api/kafka/topics/"+topic, &detail); err != nil || detail.Partitions != 1 {
			t.Errorf("node %d's /api/kafka/topics/%s right after its creation through node 3: %+v, %v", a.id, topic, detail, err)
		}
	}
	producer := newClient(t, []string{nodes[0].kafkaAddr}, kgo.DefaultProduceTopic(topic))
	if err := producer.ProduceSync(ctx, kgo.StringRecord("one"), kgo.StringRecord("two")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: topic, Partition: 0, At: 1, LeaderEpoch: -1})
	if err := newAdmin(t, []string{nodes[0].kafkaAddr}).CommitAllOffsets(ctx, groupName, offsets); err != nil {
		t.Fatal(err)
	}

	for _, a := range nodes {
		var last string
		for {
			if ctx.Err() != nil {
				t.Fatalf("node %d: %s", a.id, last)
			}
			if last = a.managementShows(ctx, single.families, topic); last == "" {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	var last string
	for {
		if ctx.Err() != nil {
			t.Fatalf("want the 2 queues and the group each counted on one node: %s", last)
		}
		var ok bool
		if last, ok = countedOnce(ctx, nodes, topic, groupName); ok {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Log(last)
}

// countedOnce scrapes every node once and reports what each counts of
// queues and of group: ok when rabbitmq_queues sums to 2 over the nodes
// and one node alone both lists group in /api/kafka/groups and reports
// its committed offset 1 on topic's partition 0.
func countedOnce(ctx context.Context, nodes []apiNode, topic, group string) (summary string, ok bool) {
	offset := `kafka_consumergroup_current_offset{consumergroup="` + group + `",partition="0",topic="` + topic + `"} 1` + "\n"
	var queues float64
	listing, reporting := 0, 0
	for _, a := range nodes {
		s, err := scrapeMetrics(ctx, "http://"+a.http+"/metrics")
		if err != nil {
			return summary + err.Error(), false
		}
		var groups []struct{ Group string }
		if err := a.getAPI(ctx, "/api/kafka/groups", &groups); err != nil {
			return summary + err.Error(), false
		}
		queues += s.samples["rabbitmq_queues"]
		if strings.Contains(s.text, offset) {
			reporting++
		}
		if slices.ContainsFunc(groups, func(g struct{ Group string }) bool { return g.Group == group }) {
			listing++
		}
		summary += fmt.Sprintf("node %d: rabbitmq_queues %v, /api/kafka/groups %v; ", a.id, s.samples["rabbitmq_queues"], groups)
	}
	summary += fmt.Sprintf("the group's offset reported by %d nodes", reporting)
	return summary, queues == 2 && listing == 1 && reporting == 1
}

// managementShows checks the node's management endpoints once: "" when
// /metrics has every family of want and shows the cluster's three brokers
// and topic's one partition with its two records on three replicas in
// sync, /metrics/per-object answers, and /api/kafka/topics lists topic;
// else what is missing.
func (a apiNode) managementShows(ctx context.Context, want []string, topic string) string {
	s, err := scrapeMetrics(ctx, "http://"+a.http+"/metrics")
	if err != nil {
		return err.Error()
	}
	var missing []string
	for _, f := range want {
		if !slices.Contains(s.families, f) {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		return fmt.Sprintf("/metrics lacks the families %v", missing)
	}
	for _, line := range []string{
		"kafka_brokers 3",
		`kafka_topic_partition_replicas{partition="0",topic="` + topic + `"} 3`,
		`kafka_topic_partition_in_sync_replica{partition="0",topic="` + topic + `"} 3`,
		`kafka_topic_partition_current_offset{partition="0",topic="` + topic + `"} 2`,
	} {
		if !strings.Contains(s.text, line+"\n") {
			return "/metrics lacks " + line
		}
	}
	if _, err := scrapeMetrics(ctx, "http://"+a.http+"/metrics/per-object"); err != nil {
		return err.Error()
	}
	var topics []struct{ Name string }
	if err := a.getAPI(ctx, "/api/kafka/topics", &topics); err != nil {
		return err.Error()
	}
	if !slices.ContainsFunc(topics, func(t struct{ Name string }) bool { return t.Name == topic }) {
		return fmt.Sprintf("/api/kafka/topics lists %v, not %s", topics, topic)
	}
	return ""
}
