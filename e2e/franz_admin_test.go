package e2e

import (
	"crypto/rand"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/node"
	"github.com/wharf-mq/wharf/internal/nodetest"
)

// TestFranzListOffsets checks ListOffsets' earliest, latest and by-time
// answers against records with known CreateTime timestamps.
func TestFranzListOffsets(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	adm := newAdmin(t, n)
	topic := "list-offsets"
	createTopic(t, adm, topic, 1, nil)

	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	var recs []*kgo.Record
	for i := range 10 {
		recs = append(recs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "v%d", i), Timestamp: base.Add(time.Duration(i) * time.Second)})
	}
	produceSync(t, newFranz(t, n), recs...)

	if got := startOffsets(t, adm, topic); got[0] != 0 || len(got) != 1 {
		t.Errorf("ListStartOffsets = %v, want map[0:0]", got)
	}
	if got := endOffsets(t, adm, topic); got[0] != 10 || len(got) != 1 {
		t.Errorf("ListEndOffsets = %v, want map[0:10]", got)
	}

	afterMilli := []struct {
		name       string
		milli      int64
		wantOffset int64
		wantTS     int64 // -1: do not check (kadm substitutes the end offset)
	}{
		{"before the first record", base.UnixMilli() - 1, 0, base.UnixMilli()},
		{"exactly a record's time", base.UnixMilli() + 3000, 3, base.UnixMilli() + 3000},
		{"between two records", base.UnixMilli() + 1500, 2, base.UnixMilli() + 2000},
		{"after the last record", base.UnixMilli() + 60_000, 10, -1},
	}
	for _, c := range afterMilli {
		listed, err := adm.ListOffsetsAfterMilli(testContext(t), c.milli, topic)
		if err != nil {
			t.Fatalf("ListOffsetsAfterMilli(%s): %v", c.name, err)
		}
		o, ok := listed.Lookup(topic, 0)
		switch {
		case !ok:
			t.Errorf("ListOffsetsAfterMilli(%s): no answer for partition 0 (got %v)", c.name, listed)
		case o.Err != nil:
			t.Errorf("ListOffsetsAfterMilli(%s): %v", c.name, o.Err)
		case o.Offset != c.wantOffset:
			t.Errorf("ListOffsetsAfterMilli(%s, %d): offset %d, want %d", c.name, c.milli, o.Offset, c.wantOffset)
		case c.wantTS != -1 && o.Timestamp != c.wantTS:
			t.Errorf("ListOffsetsAfterMilli(%s, %d): timestamp %d, want %d", c.name, c.milli, o.Timestamp, c.wantTS)
		}
	}
}

// TestFranzDeleteRecords moves the log start offset forward with
// DeleteRecords and checks listing and consuming honour it.
func TestFranzDeleteRecords(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	adm := newAdmin(t, n)
	topic := "delete-records"
	createTopic(t, adm, topic, 1, nil)
	var recs []*kgo.Record
	for i := range 10 {
		recs = append(recs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "v%d", i)})
	}
	produceSync(t, newFranz(t, n), recs...)

	deleteBefore := func(at int64) kadm.DeleteRecordsResponse {
		t.Helper()
		var os kadm.Offsets
		os.Add(kadm.Offset{Topic: topic, Partition: 0, At: at})
		resps, err := adm.DeleteRecords(testContext(t), os)
		if err != nil {
			t.Fatalf("DeleteRecords(before %d): %v", at, err)
		}
		r, ok := resps.Lookup(topic, 0)
		if !ok {
			t.Fatalf("DeleteRecords(before %d): no answer for partition 0", at)
		}
		return r
	}

	if r := deleteBefore(4); r.Err != nil || r.LowWatermark != 4 {
		t.Fatalf("DeleteRecords(before 4): low watermark %d err %v, want 4 and no error", r.LowWatermark, r.Err)
	}
	if got := startOffsets(t, adm, topic); got[0] != 4 {
		t.Errorf("after DeleteRecords(before 4): ListStartOffsets = %v, want partition 0 at 4", got)
	}
	got := consumeN(t, newConsumer(t, n, topic), 6)
	for i, r := range got {
		if want := int64(4 + i); r.Offset != want || string(r.Value) != fmt.Sprintf("v%d", want) {
			t.Errorf("after DeleteRecords(before 4): record %d is %q at offset %d, want v%d at %d", i, r.Value, r.Offset, want, want)
		}
	}

	if r := deleteBefore(100); !errors.Is(r.Err, kerr.OffsetOutOfRange) {
		t.Errorf("DeleteRecords(before 100) on a 10-record log: err %v, want OFFSET_OUT_OF_RANGE", r.Err)
	}
	if r := deleteBefore(-1); r.Err != nil || r.LowWatermark != 10 {
		t.Errorf("DeleteRecords(before -1 = high watermark): low watermark %d err %v, want 10 and no error", r.LowWatermark, r.Err)
	}
	if got := startOffsets(t, adm, topic); got[0] != 10 {
		t.Errorf("after DeleteRecords(before high watermark): ListStartOffsets = %v, want partition 0 at 10", got)
	}
	if got := endOffsets(t, adm, topic); got[0] != 10 {
		t.Errorf("DeleteRecords must not move the end: ListEndOffsets = %v, want partition 0 at 10", got)
	}
}

// TestFranzTopicConfigs creates a topic with an override, reads configs
// back, alters them incrementally and as a whole, and checks bad names are
// refused.
func TestFranzTopicConfigs(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	adm := newAdmin(t, n)
	topic := "configs"
	createTopic(t, adm, topic, 1, map[string]*string{"retention.ms": kadm.StringPtr("3600000")})

	describe := func(step string) map[string]kadm.Config {
		t.Helper()
		rcs, err := adm.DescribeTopicConfigs(testContext(t), topic)
		if err != nil {
			t.Fatalf("%s: DescribeTopicConfigs: %v", step, err)
		}
		rc, err := rcs.On(topic, nil)
		if err != nil || rc.Err != nil {
			t.Fatalf("%s: DescribeTopicConfigs(%q): %v / %v", step, topic, err, rc.Err)
		}
		out := make(map[string]kadm.Config, len(rc.Configs))
		for _, c := range rc.Configs {
			out[c.Key] = c
		}
		return out
	}
	expect := func(step string, configs map[string]kadm.Config, name, value string, dynamic bool) {
		t.Helper()
		c, ok := configs[name]
		if !ok {
			t.Errorf("%s: %s missing from DescribeConfigs", step, name)
			return
		}
		if c.MaybeValue() != value {
			t.Errorf("%s: %s = %q, want %q", step, name, c.MaybeValue(), value)
		}
		isDynamic := c.Source == kmsg.ConfigSourceDynamicTopicConfig
		if isDynamic != dynamic {
			t.Errorf("%s: %s source %v, want dynamic topic config = %v", step, name, c.Source, dynamic)
		}
	}

	configs := describe("after create")
	expect("after create", configs, "retention.ms", "3600000", true)
	expect("after create", configs, "cleanup.policy", "delete", false)
	expect("after create", configs, "max.message.bytes", "1048588", false)

	// Incremental: set one, delete another.
	resps, err := adm.AlterTopicConfigs(testContext(t), []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "segment.bytes", Value: kadm.StringPtr("1048576")},
		{Op: kadm.DeleteConfig, Name: "retention.ms"},
	}, topic)
	if err != nil {
		t.Fatalf("AlterTopicConfigs: %v", err)
	}
	if r, err := resps.On(topic, nil); err != nil || r.Err != nil {
		t.Fatalf("AlterTopicConfigs(%q): %v / %v (%s)", topic, err, r.Err, r.ErrMessage)
	}
	configs = describe("after incremental alter")
	expect("after incremental alter", configs, "segment.bytes", "1048576", true)
	expect("after incremental alter", configs, "retention.ms", "604800000", false)

	// Whole-state alter (AlterConfigs): replaces every override.
	resps, err = adm.AlterTopicConfigsState(testContext(t), []kadm.AlterConfig{
		{Name: "max.message.bytes", Value: kadm.StringPtr("2048")},
	}, topic)
	if err != nil {
		t.Fatalf("AlterTopicConfigsState: %v", err)
	}
	if r, err := resps.On(topic, nil); err != nil || r.Err != nil {
		t.Fatalf("AlterTopicConfigsState(%q): %v / %v (%s)", topic, err, r.Err, r.ErrMessage)
	}
	configs = describe("after whole-state alter")
	expect("after whole-state alter", configs, "max.message.bytes", "2048", true)
	expect("after whole-state alter", configs, "segment.bytes", "1073741824", false)

	// An unknown config name is refused and changes nothing.
	resps, err = adm.AlterTopicConfigs(testContext(t), []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "no.such.config", Value: kadm.StringPtr("1")},
	}, topic)
	if err != nil {
		t.Fatalf("AlterTopicConfigs(unknown name): request failed: %v", err)
	}
	if r, _ := resps.On(topic, nil); !errors.Is(r.Err, kerr.InvalidConfig) {
		t.Errorf("AlterTopicConfigs(no.such.config): err %v, want INVALID_CONFIG", r.Err)
	}
	if _, ok := describe("after refused alter")["no.such.config"]; ok {
		t.Errorf("refused config no.such.config shows up in DescribeConfigs")
	}

	// Describing an unknown topic names the error instead of failing the request.
	rcs, err := adm.DescribeTopicConfigs(testContext(t), "no-such-topic")
	if err != nil {
		t.Fatalf("DescribeTopicConfigs(no-such-topic): request failed: %v", err)
	}
	if rc, _ := rcs.On("no-such-topic", nil); !errors.Is(rc.Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("DescribeTopicConfigs(no-such-topic): err %v, want UNKNOWN_TOPIC_OR_PARTITION", rc.Err)
	}
}

// TestFranzCreatePartitions grows a topic and uses the new partition; a
// shrink is refused.
func TestFranzCreatePartitions(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	adm := newAdmin(t, n)
	topic := "grow"
	createTopic(t, adm, topic, 1, nil)

	resps, err := adm.CreatePartitions(testContext(t), 2, topic)
	if err != nil {
		t.Fatalf("CreatePartitions(+2): %v", err)
	}
	if r, err := resps.On(topic, nil); err != nil || r.Err != nil {
		t.Fatalf("CreatePartitions(%q, +2): %v / %v (%s)", topic, err, r.Err, r.ErrMessage)
	}
	if got := partitionCount(t, adm, topic); got != 3 {
		t.Fatalf("after CreatePartitions(+2) on a 1-partition topic: Metadata lists %d partitions, want 3", got)
	}

	resps, err = adm.UpdatePartitions(testContext(t), 2, topic)
	if err != nil {
		t.Fatalf("UpdatePartitions(2): request failed: %v", err)
	}
	if r, _ := resps.On(topic, nil); !errors.Is(r.Err, kerr.InvalidPartitions) {
		t.Errorf("shrinking 3 partitions to 2: err %v, want INVALID_PARTITIONS", r.Err)
	}

	// A fresh client learns the new partitions and can use the last one.
	producer := newFranz(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceSync(t, producer, &kgo.Record{Topic: topic, Partition: 2, Value: []byte("in the new partition")})
	got := consumeN(t, newConsumer(t, n, topic), 1)
	if got[0].Partition != 2 || got[0].Offset != 0 || string(got[0].Value) != "in the new partition" {
		t.Errorf("consumed %q at %d/%d, want %q at 2/0", got[0].Value, got[0].Partition, got[0].Offset, "in the new partition")
	}
}

// TestFranzDeleteTopics deletes a topic with data, checks it is gone, and
// that recreating the name starts empty.
func TestFranzDeleteTopics(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	adm := newAdmin(t, n)
	topic := "doomed"
	createTopic(t, adm, topic, 2, nil)
	produceSync(t, newFranz(t, n), &kgo.Record{Topic: topic, Value: []byte("a")}, &kgo.Record{Topic: topic, Value: []byte("b")})

	resps, err := adm.DeleteTopics(testContext(t), topic)
	if err != nil {
		t.Fatalf("DeleteTopics(%q): %v", topic, err)
	}
	if err := resps.Error(); err != nil {
		t.Fatalf("DeleteTopics(%q): %v", topic, err)
	}
	all, err := adm.ListTopics(testContext(t))
	if err != nil {
		t.Fatalf("ListTopics: %v", err)
	}
	if all.Has(topic) {
		t.Errorf("deleted topic %q is still listed by Metadata: %v", topic, all.Names())
	}
	one, err := adm.ListTopics(testContext(t), topic)
	if err != nil {
		t.Fatalf("ListTopics(%q): %v", topic, err)
	}
	if d := one[topic]; !errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("Metadata for deleted topic %q: err %v, want UNKNOWN_TOPIC_OR_PARTITION", topic, d.Err)
	}

	resps, err = adm.DeleteTopics(testContext(t), "never-existed")
	if err != nil {
		t.Fatalf("DeleteTopics(never-existed): request failed: %v", err)
	}
	if r, _ := resps.On("never-existed", nil); !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("DeleteTopics(never-existed): err %v, want UNKNOWN_TOPIC_OR_PARTITION", r.Err)
	}

	createTopic(t, adm, topic, 1, nil)
	// A fresh admin: kadm answers ListOffsets from its client's metadata
	// cache (MetadataMinAge, 5 s), which still says "unknown topic" from
	// the lookup above.
	if got := endOffsets(t, newAdmin(t, n), topic); got[0] != 0 || len(got) != 1 {
		t.Errorf("recreated topic %q: end offsets %v, want map[0:0] (old data must be gone)", topic, got)
	}
}

// TestFranzAutoCreateOnProduce produces to a topic nobody created, with the
// client allowing auto-creation: the broker creates it with num.partitions.
func TestFranzAutoCreateOnProduce(t *testing.T) {
	t.Parallel()
	n := startNode(t, nodetest.WithConfig(func(c *node.Config) { c.DefaultPartitions = 2 }))
	adm := newAdmin(t, n)
	topic := "auto-created"
	producer := newFranz(t, n, kgo.AllowAutoTopicCreation())
	produceSync(t, producer, &kgo.Record{Topic: topic, Value: []byte("first")})
	if got := partitionCount(t, adm, topic); got != 2 {
		t.Errorf("auto-created topic has %d partitions, want num.partitions = 2", got)
	}
	got := consumeN(t, newConsumer(t, n, topic), 1)
	if string(got[0].Value) != "first" {
		t.Errorf("consumed %q from auto-created topic, want %q", got[0].Value, "first")
	}
}

// TestFranzUnknownTopicAutoCreateDisabled: with auto-creation off, a
// produce to a missing topic fails with UNKNOWN_TOPIC_OR_PARTITION even when
// the client asks for auto-creation, and nothing is created.
func TestFranzUnknownTopicAutoCreateDisabled(t *testing.T) {
	t.Parallel()
	n := startNode(t, withAutoCreate(false))
	adm := newAdmin(t, n)
	topic := "not-there"
	producer := newFranz(t, n,
		kgo.AllowAutoTopicCreation(),
		kgo.UnknownTopicRetries(0),
		kgo.MetadataMinAge(50*time.Millisecond),
	)
	res := producer.ProduceSync(testContext(t), &kgo.Record{Topic: topic, Value: []byte("x")})
	if err := res.FirstErr(); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Errorf("produce to missing topic with auto-create disabled: err %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
	all, err := adm.ListTopics(testContext(t))
	if err != nil {
		t.Fatalf("ListTopics: %v", err)
	}
	if all.Has(topic) {
		t.Errorf("topic %q was created although auto.create.topics.enable=false", topic)
	}
}

// TestFranzRecordTooLarge: a batch over the topic's max.message.bytes, or
// over the broker-wide message.max.bytes default, is refused with
// MESSAGE_TOO_LARGE, and the partition keeps working afterwards.
func TestFranzRecordTooLarge(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	adm := newAdmin(t, n)
	small := "small-max"
	createTopic(t, adm, small, 1, map[string]*string{"max.message.bytes": kadm.StringPtr("1024")})
	dflt := "default-max"
	createTopic(t, adm, dflt, 1, nil)

	producer := newFranz(t, n,
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerBatchMaxBytes(4<<20), // let the client send what the broker must refuse
	)
	cases := []struct {
		topic string
		size  int
	}{
		{small, 4096},     // over the topic override of 1024
		{dflt, 1_100_000}, // over the 1048588 default
	}
	for _, c := range cases {
		value := make([]byte, c.size)
		rand.Read(value) // incompressible, in case a codec sneaks in
		res := producer.ProduceSync(testContext(t), &kgo.Record{Topic: c.topic, Value: value})
		if err := res.FirstErr(); !errors.Is(err, kerr.MessageTooLarge) {
			t.Errorf("produce %d-byte record to %q: err %v, want MESSAGE_TOO_LARGE", c.size, c.topic, err)
		}
	}
	produceSync(t, producer, &kgo.Record{Topic: small, Value: []byte("fits")})
	got := consumeN(t, newConsumer(t, n, small), 1)
	if got[0].Offset != 0 || string(got[0].Value) != "fits" {
		t.Errorf("after a refused record, consumed %q at offset %d, want %q at 0", got[0].Value, got[0].Offset, "fits")
	}
}
