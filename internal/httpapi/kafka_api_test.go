package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wharf-mq/wharf/internal/kafkaview"
	"github.com/wharf-mq/wharf/internal/node"
	"github.com/wharf-mq/wharf/internal/nodetest"
)

// kafkaClient is a franz-go client of n.
func kafkaClient(t *testing.T, n *node.Node, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(n.KafkaAddr())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestKafkaTopicsAndRecords creates a topic and produces records with
// franz-go, then reads them over HTTP: the topic with its partitions,
// sizes and configs; records from an offset and from a time, filtered by
// key and by header, rendered as text, JSON and hex. A record produced
// over HTTP lands on the partition franz-go's default partitioner picks
// for its key, and franz-go reads it back.
func TestKafkaTopicsAndRecords(t *testing.T) {
	a, n := newAPI(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := kafkaClient(t, n)
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 3, 1, map[string]*string{"retention.ms": kadm.StringPtr("3600000")}, "orders"); err != nil {
		t.Fatal(err)
	}
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	var recs []*kgo.Record
	for i := range 10 {
		r := &kgo.Record{Topic: "orders", Partition: 0, Timestamp: base.Add(time.Duration(i) * time.Minute),
			Key: []byte(fmt.Sprintf("user-%d", i%3)), Value: []byte(fmt.Sprintf(`{"n":%d}`, i))}
		if i == 7 {
			r.Headers = []kgo.RecordHeader{{Key: "source", Value: []byte("batch")}}
			r.Value = []byte{0xff, 0x00, 0x41}
		}
		recs = append(recs, r)
	}
	manual := kafkaClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := manual.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	topics := get[[]kafkaview.TopicSummary](a, "/api/kafka/topics")
	var orders *kafkaview.TopicSummary
	for i := range topics {
		if topics[i].Name == "orders" {
			orders = &topics[i]
		}
	}
	if orders == nil || orders.Partitions != 3 || orders.Messages != 10 || orders.Size == 0 || orders.BytesIn == 0 {
		t.Fatalf("topic list: %+v", topics)
	}
	detail := get[kafkaview.TopicDetail](a, "/api/kafka/topics/orders")
	if len(detail.PartitionList) != 3 || detail.PartitionList[0].EndOffset != 10 || detail.PartitionList[1].EndOffset != 0 {
		t.Fatalf("partitions: %+v", detail.PartitionList)
	}
	if !hasConfig(detail.Configs, "retention.ms", "3600000", false) || !hasConfig(detail.Configs, "cleanup.policy", "delete", true) {
		t.Fatalf("configs: %+v", detail.Configs)
	}

	records := func(query string) kafkaview.BrowseResult {
		t.Helper()
		return get[kafkaview.BrowseResult](a, "/api/kafka/topics/orders/partitions/0/records?"+query)
	}
	page := records("offset=2&limit=3")
	if offsets(page) != "2,3,4" || page.NextOffset != 5 || page.Records[0].Value.Data != `{"n":2}` || page.Records[0].Key.Data != "user-2" {
		t.Fatalf("from offset 2: %+v", page)
	}
	at := base.Add(6*time.Minute - time.Second).UnixMilli()
	if page = records(fmt.Sprint("timestamp=", at, "&limit=2")); offsets(page) != "6,7" || page.Records[0].Timestamp != base.Add(6*time.Minute).UnixMilli() {
		t.Fatalf("from a time: %+v", page)
	}
	if page = records("key=user-1"); offsets(page) != "1,4,7" || page.NextOffset != 10 {
		t.Fatalf("key filter: %+v", page)
	}
	page = records("header=source&header_value=bat")
	if offsets(page) != "7" || page.Records[0].Value.Format != "hex" || page.Records[0].Value.Data != "ff 00 41" ||
		page.Records[0].Headers[0].Value.Data != "batch" {
		t.Fatalf("header filter: %+v", page)
	}
	if page = records("offset=3&limit=1&format=json"); page.Records[0].Value.Data != "{\n  \"n\": 3\n}" || page.Records[0].Key.Format != "text" {
		t.Fatalf("as JSON: %+v", page.Records[0])
	}
	if page = records("offset=3&limit=1&format=hex"); page.Records[0].Key.Data != "75 73 65 72 2d 30" {
		t.Fatalf("as hex: %+v", page.Records[0])
	}
	a.want(400, "GET", "/api/kafka/topics/orders/partitions/0/records?format=yaml", "")
	a.want(404, "GET", "/api/kafka/topics/orders/partitions/9/records", "")
	a.want(404, "GET", "/api/kafka/topics/nope", "")

	body := a.want(200, "POST", "/api/kafka/topics/orders/records",
		`{"key":"customer-42","value":"hello","headers":[{"key":"via","value":"console"}]}`)
	var produced kafkaview.ProduceResult
	if err := json.Unmarshal([]byte(body), &produced); err != nil {
		t.Fatal(err)
	}
	// franz-go's default partitioner hashes keys as Kafka's does.
	byKey, err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Key: []byte("customer-42"), Value: []byte("again")}).First()
	if err != nil || byKey.Partition != produced.Partition {
		t.Fatalf("produced over HTTP to partition %d; franz-go put the same key on %d (%v)", produced.Partition, byKey.Partition, err)
	}
	consumer := kafkaClient(t, n, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		"orders": {produced.Partition: kgo.NewOffset().At(produced.Offset)}}))
	fetches := consumer.PollRecords(ctx, 1)
	if err := fetches.Err(); err != nil {
		t.Fatal(err)
	}
	got := fetches.Records()[0]
	if string(got.Value) != "hello" || string(got.Key) != "customer-42" || len(got.Headers) != 1 || string(got.Headers[0].Value) != "console" {
		t.Fatalf("franz-go read %+v", got)
	}
	a.want(400, "POST", "/api/kafka/topics/__consumer_offsets/records", `{"value":"x"}`)
	a.want(404, "POST", "/api/kafka/topics/nope/records", `{"value":"x"}`)
}

func hasConfig(cs []kafkaview.ConfigEntry, name, value string, isDefault bool) bool {
	for _, c := range cs {
		if c.Name == name {
			return c.Value == value && c.Default == isDefault
		}
	}
	return false
}

func offsets(page kafkaview.BrowseResult) string {
	var out []string
	for _, r := range page.Records {
		out = append(out, fmt.Sprint(r.Offset))
	}
	return strings.Join(out, ",")
}

// TestKafkaGroupsLagAndReset consumes a topic in a group with franz-go,
// then checks over HTTP that the group shows its member and, once more
// records are produced, lag in records and in time; that a reset is
// refused while the member is live; and that after it left, a reset
// previews without changing anything and commits with execute, as
// `wharf groups reset-offsets` does.
func TestKafkaGroupsLagAndReset(t *testing.T) {
	a, n := newAPI(t, nodetest.WithConfig(func(c *nodeConfig) {
		c.Groups.InitialRebalanceDelay = -1
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := kafkaClient(t, n)
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "events"); err != nil {
		t.Fatal(err)
	}
	produce := func(count int, at time.Time) {
		t.Helper()
		var recs []*kgo.Record
		for range count {
			recs = append(recs, &kgo.Record{Topic: "events", Timestamp: at, Value: []byte("e")})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(5, time.Now())
	member := kafkaClient(t, n, kgo.ConsumerGroup("readers"), kgo.ConsumeTopics("events"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	for consumed := 0; consumed < 5; {
		fetches := member.PollFetches(ctx)
		if err := fetches.Err(); err != nil {
			t.Fatal(err)
		}
		consumed += fetches.NumRecords()
	}
	if err := member.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	group := get[kafkaview.GroupDetail](a, "/api/kafka/groups/readers")
	if group.Members != 1 || len(group.MemberList[0].Assignment) != 1 || group.Lag != 0 || len(group.Partitions) != 1 {
		t.Fatalf("group after consuming: %+v", group)
	}
	old := time.Now().Add(-90 * time.Second)
	produce(3, old)
	group = get[kafkaview.GroupDetail](a, "/api/kafka/groups/readers")
	if p := group.Partitions[0]; p.Lag != 3 || p.Committed != 5 || p.End != 8 || p.LagMs < 89_000 || p.NextTimestamp != old.UnixMilli() {
		t.Fatalf("lag after producing: %+v", group.Partitions)
	}
	list := get[[]kafkaview.GroupSummary](a, "/api/kafka/groups")
	if len(list) != 1 || list[0].Lag != 3 || list[0].Members != 1 || list[0].Type != "classic" {
		t.Fatalf("group list: %+v", list)
	}

	reset := `{"mode":"to-earliest","topics":[{"topic":"events"}]}`
	if code, body, _ := a.do("POST", "/api/kafka/groups/readers/reset-offsets", reset); code != 409 || !strings.Contains(body, "live member") {
		t.Fatalf("reset with a live member: %d %s", code, body)
	}
	member.Close()
	waitUntil(t, "the member to leave", func() bool {
		return get[kafkaview.GroupDetail](a, "/api/kafka/groups/readers").Members == 0
	})
	var plan kafkaview.ResetResult
	if err := json.Unmarshal([]byte(a.want(200, "POST", "/api/kafka/groups/readers/reset-offsets", reset)), &plan); err != nil {
		t.Fatal(err)
	}
	if plan.Executed || len(plan.Steps) != 1 || plan.Steps[0].Current != 5 || plan.Steps[0].Next != 0 {
		t.Fatalf("preview: %+v", plan)
	}
	if committedOffset(t, adm, "readers") != 5 {
		t.Fatal("a preview changed the committed offset")
	}
	executed := strings.Replace(reset, "{", `{"execute":true,`, 1)
	if err := json.Unmarshal([]byte(a.want(200, "POST", "/api/kafka/groups/readers/reset-offsets", executed)), &plan); err != nil {
		t.Fatal(err)
	}
	if !plan.Executed || committedOffset(t, adm, "readers") != 0 {
		t.Fatalf("execute: %+v", plan)
	}
	if group = get[kafkaview.GroupDetail](a, "/api/kafka/groups/readers"); group.Lag != 8 {
		t.Fatalf("lag after the reset: %+v", group)
	}
	a.want(400, "POST", "/api/kafka/groups/readers/reset-offsets", `{"mode":"to-nowhere","topics":[{"topic":"events"}]}`)
	a.want(400, "POST", "/api/kafka/groups/readers/reset-offsets", `{"mode":"to-latest"}`)
	a.want(404, "POST", "/api/kafka/groups/readers/reset-offsets", `{"mode":"to-latest","topics":[{"topic":"events","partitions":[4]}]}`)
	a.want(404, "GET", "/api/kafka/groups/nobody", "")
}

func committedOffset(t *testing.T, adm *kadm.Client, group string) int64 {
	t.Helper()
	offsets, err := adm.FetchOffsets(context.Background(), group)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := offsets.Lookup("events", 0)
	if !ok {
		return -1
	}
	return o.At
}
