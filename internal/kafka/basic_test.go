package kafka

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/seglog"
)

func TestApiVersionsEveryVersion(t *testing.T) {
	ts := startServer(t)
	c := ts.dial(t)
	for v := int16(0); v <= apiVersions[kmsg.ApiVersions].max; v++ {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = v
		req.ClientSoftwareName, req.ClientSoftwareVersion = "wharf-test", "1.0"
		resp := c.roundTrip(req).(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("v%d: error %d", v, resp.ErrorCode)
		}
		checkAdvertised(t, resp.ApiKeys)
	}
}

func checkAdvertised(t *testing.T, keys []kmsg.ApiVersionsResponseApiKey) {
	t.Helper()
	if len(keys) != len(apiVersions) {
		t.Fatalf("%d keys advertised, want %d", len(keys), len(apiVersions))
	}
	for _, k := range keys {
		vr, ok := apiVersions[kmsg.Key(k.ApiKey)]
		if !ok || vr.min != k.MinVersion || vr.max != k.MaxVersion {
			t.Errorf("key %d advertised %d-%d, table %+v", k.ApiKey, k.MinVersion, k.MaxVersion, vr)
		}
		if max := kmsg.RequestForKey(k.ApiKey).MaxVersion(); k.MaxVersion > max {
			t.Errorf("key %d advertises v%d above kmsg's v%d", k.ApiKey, k.MaxVersion, max)
		}
	}
}

// A too-new ApiVersions is answered in v0 format with UNSUPPORTED_VERSION
// and our versions, and the connection stays usable for the retry.
func TestApiVersionsUnsupportedVersionFallback(t *testing.T) {
	ts := startServer(t)
	c := ts.dial(t)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 42 // kmsg encodes it like its newest version; we must not decode it
	req.ClientSoftwareName, req.ClientSoftwareVersion = "wharf-test", "1.0"
	corr := c.send(req)

	v0 := kmsg.NewPtrApiVersionsRequest()
	v0.Version = 0
	resp := c.recv(v0, corr).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("error code %d, want UNSUPPORTED_VERSION", resp.ErrorCode)
	}
	checkAdvertised(t, resp.ApiKeys)

	retry := kmsg.NewPtrApiVersionsRequest()
	retry.Version = 3
	retry.ClientSoftwareName, retry.ClientSoftwareVersion = "wharf-test", "1.0"
	if r := c.roundTrip(retry).(*kmsg.ApiVersionsResponse); r.ErrorCode != 0 {
		t.Fatalf("retry at v3: error %d", r.ErrorCode)
	}
}

func TestApiVersionsChecks(t *testing.T) {
	ts := startServer(t)
	c := ts.dial(t)

	bad := kmsg.NewPtrApiVersionsRequest()
	bad.Version = 3
	bad.ClientSoftwareName, bad.ClientSoftwareVersion = "-bad name", "1.0"
	if r := c.roundTrip(bad).(*kmsg.ApiVersionsResponse); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("bad software name: error %d, want INVALID_REQUEST", r.ErrorCode)
	}

	wrong := kmsg.NewPtrApiVersionsRequest()
	wrong.Version = 5
	wrong.ClientSoftwareName, wrong.ClientSoftwareVersion = "wharf-test", "1.0"
	other := "some-other-cluster"
	wrong.ClusterID, wrong.NodeID = &other, ts.b.NodeID()
	if r := c.roundTrip(wrong).(*kmsg.ApiVersionsResponse); r.ErrorCode != kerr.RebootstrapRequired.Code {
		t.Errorf("wrong cluster: error %d, want REBOOTSTRAP_REQUIRED", r.ErrorCode)
	}

	right := kmsg.NewPtrApiVersionsRequest()
	right.Version = 5
	right.ClientSoftwareName, right.ClientSoftwareVersion = "wharf-test", "1.0"
	id := ts.b.ClusterID()
	right.ClusterID, right.NodeID = &id, ts.b.NodeID()
	if r := c.roundTrip(right).(*kmsg.ApiVersionsResponse); r.ErrorCode != 0 {
		t.Errorf("right cluster: error %d", r.ErrorCode)
	}
}

func TestMetadata(t *testing.T) {
	ts := startServer(t, withBrokerConfig(func(c *brokerConfig) { c.AutoCreateTopics = ptr(false) }))
	top := ts.createTopic(t, "orders", 3, nil)
	c := ts.dial(t)

	for _, v := range []int16{0, 1, 4, 7, 9, 10, 12, 13} {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = v
		req.IncludeTopicAuthorizedOperations = true
		name := "orders"
		missing := "missing"
		badName := "bad/name"
		for _, n := range []*string{&name, &missing, &badName} {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = n
			req.Topics = append(req.Topics, rt)
		}
		resp := c.roundTrip(req).(*kmsg.MetadataResponse)
		if len(resp.Brokers) != 1 || resp.Brokers[0].Host != "127.0.0.1" || resp.Brokers[0].NodeID != ts.b.NodeID() {
			t.Fatalf("v%d brokers: %+v", v, resp.Brokers)
		}
		if v >= 2 && (resp.ClusterID == nil || *resp.ClusterID != ts.b.ClusterID()) {
			t.Fatalf("v%d cluster id %v", v, resp.ClusterID)
		}
		if len(resp.Topics) != 3 {
			t.Fatalf("v%d: %d topics", v, len(resp.Topics))
		}
		got := resp.Topics[0]
		if got.ErrorCode != 0 || len(got.Partitions) != 3 {
			t.Fatalf("v%d orders: error %d, %d partitions", v, got.ErrorCode, len(got.Partitions))
		}
		if v >= 10 && got.TopicID != top.ID() {
			t.Errorf("v%d topic id %x, want %x", v, got.TopicID, top.ID())
		}
		// Without an authorizer every operation of a topic is allowed:
		// READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS,
		// ALTER_CONFIGS (bits 3-8, 10, 11).
		if v >= 8 && got.AuthorizedOperations != 0b1101_1111_1000 {
			t.Errorf("v%d authorized operations %b", v, got.AuthorizedOperations)
		}
		for _, p := range got.Partitions {
			if p.Leader != ts.b.NodeID() || len(p.Replicas) != 1 || len(p.ISR) != 1 || p.ErrorCode != 0 {
				t.Errorf("v%d partition %+v", v, p)
			}
		}
		if code := resp.Topics[1].ErrorCode; code != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("v%d missing topic: %d", v, code)
		}
		if code := resp.Topics[2].ErrorCode; code != kerr.InvalidTopicException.Code {
			t.Errorf("v%d bad name: %d", v, code)
		}
	}

	// All topics: null list (v1+), empty list (v0).
	all := kmsg.NewPtrMetadataRequest()
	all.Version = 9
	if resp := c.roundTrip(all).(*kmsg.MetadataResponse); len(resp.Topics) != 1 {
		t.Errorf("null topics: %d topics, want 1", len(resp.Topics))
	}
	all0 := kmsg.NewPtrMetadataRequest()
	all0.Version = 0
	all0.Topics = []kmsg.MetadataRequestTopic{}
	if resp := c.roundTrip(all0).(*kmsg.MetadataResponse); len(resp.Topics) != 1 {
		t.Errorf("v0 empty topics: %d topics, want 1", len(resp.Topics))
	}
	none := kmsg.NewPtrMetadataRequest()
	none.Version = 9
	none.Topics = []kmsg.MetadataRequestTopic{}
	if resp := c.roundTrip(none).(*kmsg.MetadataResponse); len(resp.Topics) != 0 {
		t.Errorf("v9 empty topics: %d topics, want 0", len(resp.Topics))
	}

	// By topic ID (v12+).
	byID := kmsg.NewPtrMetadataRequest()
	byID.Version = 12
	known, unknown := kmsg.NewMetadataRequestTopic(), kmsg.NewMetadataRequestTopic()
	known.TopicID, unknown.TopicID = top.ID(), [16]byte{1, 2, 3}
	byID.Topics = []kmsg.MetadataRequestTopic{known, unknown}
	resp := c.roundTrip(byID).(*kmsg.MetadataResponse)
	if resp.Topics[0].ErrorCode != 0 || resp.Topics[0].Topic == nil || *resp.Topics[0].Topic != "orders" {
		t.Errorf("by id: %+v", resp.Topics[0])
	}
	if resp.Topics[1].ErrorCode != kerr.UnknownTopicID.Code {
		t.Errorf("unknown id: error %d", resp.Topics[1].ErrorCode)
	}
}

func TestMetadataAutoCreate(t *testing.T) {
	ts := startServer(t)
	c := ts.dial(t)
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	name := "auto-created"
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = &name
	req.Topics = []kmsg.MetadataRequestTopic{rt}

	if resp := c.roundTrip(req).(*kmsg.MetadataResponse); resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("without AllowAutoTopicCreation: error %d", resp.Topics[0].ErrorCode)
	}
	req.AllowAutoTopicCreation = true
	// As Kafka: the request that creates the topic gets LEADER_NOT_AVAILABLE
	// and no partitions, the next one the topic.
	resp := c.roundTrip(req).(*kmsg.MetadataResponse)
	if resp.Topics[0].ErrorCode != kerr.LeaderNotAvailable.Code || len(resp.Topics[0].Partitions) != 0 {
		t.Fatalf("auto-create: %+v, want LEADER_NOT_AVAILABLE and no partitions", resp.Topics[0])
	}
	if _, err := ts.b.Topic(name); err != nil {
		t.Fatalf("topic not created: %v", err)
	}
	resp = c.roundTrip(req).(*kmsg.MetadataResponse)
	if resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("after auto-creation: %+v", resp.Topics[0])
	}
}

func TestProduceConsumeAcks(t *testing.T) {
	ts := startServer(t)
	for _, acks := range []struct {
		name string
		opt  kgo.Acks
	}{{"all", kgo.AllISRAcks()}, {"leader", kgo.LeaderAck()}, {"none", kgo.NoAck()}} {
		t.Run(acks.name, func(t *testing.T) {
			topic := "acks-" + acks.name
			ts.createTopic(t, topic, 2, nil)
			cl := ts.client(t, kgo.RequiredAcks(acks.opt), kgo.DisableIdempotentWrite(),
				kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			var want []string
			for p := int32(0); p < 2; p++ {
				for i := 0; i < 20; i++ {
					v := fmt.Sprintf("p%d-%d", p, i)
					want = append(want, v)
					produceSync(t, cl, topic, p, v)
				}
			}
			recs := consume(t, ts, topic, len(want))
			got := map[int32][]*kgo.Record{}
			for _, r := range recs {
				got[r.Partition] = append(got[r.Partition], r)
			}
			for p := int32(0); p < 2; p++ {
				if len(got[p]) != 20 {
					t.Fatalf("partition %d: %d records", p, len(got[p]))
				}
				for i, r := range got[p] {
					if r.Offset != int64(i) || string(r.Value) != fmt.Sprintf("p%d-%d", p, i) {
						t.Fatalf("partition %d record %d: offset %d value %q", p, i, r.Offset, r.Value)
					}
				}
			}
		})
	}
}

// franz-go produces idempotently by default; without InitProducerId in our
// ApiVersions it must fall back to plain produce rather than fail.
// A default kgo client produces idempotently: it gets a producer id from
// InitProducerId and its batches carry it.
func TestDefaultKgoProducerIsIdempotent(t *testing.T) {
	ts := startServer(t)
	ts.createTopic(t, "idem", 1, nil)
	cl := ts.client(t)
	produceSync(t, cl, "idem", 0, "a", "b", "c")
	recs := consume(t, ts, "idem", 3)
	if string(recs[2].Value) != "c" || recs[2].ProducerID < 0 {
		t.Fatalf("last record: %q producer id %d, want an id from InitProducerId", recs[2].Value, recs[2].ProducerID)
	}
}

func TestProduceErrors(t *testing.T) {
	ts := startServer(t, withBrokerConfig(func(c *brokerConfig) { c.AutoCreateTopics = ptr(false) }))
	ts.createTopic(t, "small", 1, map[string]string{"max.message.bytes": "200"})
	ts.createTopic(t, "tiny-segments", 1, map[string]string{"segment.bytes": "100", "max.message.bytes": "1000"})
	c := ts.dial(t)

	batch := func(value string) []byte {
		return buildBatch(t, value)
	}
	corrupt := batch("corrupt me")
	corrupt[len(corrupt)-1] ^= 0xff // breaks the CRC

	cases := []struct {
		name    string
		topic   string
		part    int32
		acks    int16
		records []byte
		want    *kerr.Error
	}{
		{"unknown topic", "nope", 0, 1, batch("x"), kerr.UnknownTopicOrPartition},
		{"unknown partition", "small", 7, 1, batch("x"), kerr.UnknownTopicOrPartition},
		{"too large", "small", 0, 1, batch(string(make([]byte, 500))), kerr.MessageTooLarge},
		{"corrupt", "small", 0, 1, corrupt, kerr.CorruptMessage},
		{"over segment.bytes", "tiny-segments", 0, 1, batch(string(make([]byte, 300))), kerr.RecordListTooLarge},
		{"no batches", "small", 0, 1, nil, kerr.InvalidRecord},
		{"bad acks", "small", 0, 2, batch("x"), kerr.InvalidRequiredAcks},
		{"ok", "small", 0, -1, batch("x"), nil},
	}
	for _, tc := range cases {
		req := kmsg.NewPtrProduceRequest()
		req.Version = 9
		req.Acks = tc.acks
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = tc.topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = tc.part, tc.records
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := c.roundTrip(req).(*kmsg.ProduceResponse)
		got := resp.Topics[0].Partitions[0]
		wantCode := int16(0)
		if tc.want != nil {
			wantCode = tc.want.Code
		}
		if got.ErrorCode != wantCode {
			t.Errorf("%s: error %v, want %v", tc.name, kerr.ErrorForCode(got.ErrorCode), tc.want)
		}
	}
}

// acks=0 gets no response; a failed acks=0 produce closes the connection so
// the producer refreshes its metadata.
func TestProduceAcksZero(t *testing.T) {
	ts := startServer(t, withBrokerConfig(func(c *brokerConfig) { c.AutoCreateTopics = ptr(false) }))
	ts.createTopic(t, "t0", 1, nil)
	c := ts.dial(t)

	produce := func(topic string) {
		req := kmsg.NewPtrProduceRequest()
		req.Version = 7
		req.Acks = 0
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = buildBatch(t, "fire and forget")
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		c.send(req)
	}
	produce("t0")
	// The next response on the connection must be the metadata one: the
	// produce wrote nothing.
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 9
	c.roundTrip(md)
	if hw := mustPartition(t, ts, "t0", 0).HighWatermark(); hw != 1 {
		t.Fatalf("high watermark %d after acks=0 produce", hw)
	}

	produce("unknown-topic")
	c.expectClosed()
}

func TestMalformedRequestClosesOnlyItsConnection(t *testing.T) {
	ts := startServer(t)
	ts.createTopic(t, "survivor", 1, nil)
	cl := ts.client(t, kgo.DefaultProduceTopic("survivor"))
	produceSync(t, cl, "survivor", 0, "before")

	frames := map[string][]byte{
		// Metadata v12 header, then a body cut short.
		"truncated body": {0, 0, 0, 12, 0, 3, 0, 12, 0, 0, 0, 1, 0, 0, 0, 0x05, 0xff},
		"unknown key":    {0, 0, 0, 10, 0x7f, 0x00, 0, 0, 0, 0, 0, 1, 0, 0},
		"bad version":    {0, 0, 0, 10, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0}, // Produce v1
		"short header":   {0, 0, 0, 3, 0, 3, 0},
		"too large":      {0x7f, 0xff, 0xff, 0xff},
		"negative size":  {0xff, 0xff, 0xff, 0xff},
	}
	for name, frame := range frames {
		t.Run(name, func(t *testing.T) {
			c := ts.dial(t)
			c.write(frame)
			c.expectClosed()
			produceSync(t, cl, "survivor", 0, "after "+name)
		})
	}
}

func TestShutdownWakesLongPoll(t *testing.T) {
	waiting := make(chan struct{}, 1)
	ts := startServer(t, withServer(func(s *Server) {
		s.testHookFetchWaiting = func() {
			select {
			case waiting <- struct{}{}:
			default:
			}
		}
	}))
	ts.createTopic(t, "quiet", 1, nil)
	c := ts.dial(t)
	req := fetchRequest(12, "quiet", 0, 0)
	req.MaxWaitMillis = 60_000
	corr := c.send(req)
	<-waiting

	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ts.s.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("shutdown took %v with a fetch parked", d)
	}
	resp := c.recv(req, corr).(*kmsg.FetchResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions[0].RecordBatches) != 0 {
		t.Fatalf("fetch answer at shutdown: %+v", resp.Topics)
	}
	c.expectClosed()
	if err := <-ts.served; err != nil {
		t.Fatalf("serve: %v", err)
	}
	ts.served <- nil // for the cleanup
}

func TestServeAfterShutdown(t *testing.T) {
	ts := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := ts.s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	cl := ts.client(t, kgo.RequestRetries(0), kgo.DialTimeout(time.Second))
	err := cl.Ping(ctx)
	if err == nil {
		t.Fatal("ping succeeded after shutdown")
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ping hung: %v", err)
	}
}

func TestRequestSizeLimit(t *testing.T) {
	ts := startServer(t, withServer(func(s *Server) { s.cfg.MaxRequestBytes = 1000 }))
	ts.createTopic(t, "limited", 1, nil)
	c := ts.dial(t)

	small := kmsg.NewPtrProduceRequest()
	small.Version = 9
	small.Acks = 1
	small.Topics = []kmsg.ProduceRequestTopic{{Topic: "limited", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: buildBatch(t, "ok")}}}}
	if p := c.roundTrip(small).(*kmsg.ProduceResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 {
		t.Fatalf("small produce: error %d", p.ErrorCode)
	}
	big := kmsg.NewPtrProduceRequest()
	big.Version = 9
	big.Acks = 1
	big.Topics = []kmsg.ProduceRequestTopic{{Topic: "limited", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: buildBatch(t, string(make([]byte, 2000)))}}}}
	c.send(big)
	c.expectClosed()
}

// kgo end to end with enough data for the sendfile path, fetch sessions
// (incremental fetches) and topic IDs (Fetch v13+).
func TestConsumeLargeWithKgo(t *testing.T) {
	ts := startServer(t)
	ts.createTopic(t, "large", 3, nil)
	cl := ts.client(t, kgo.DefaultProduceTopic("large"))
	const n = 3000
	value := make([]byte, 1000)
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: value})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	got := consume(t, ts, "large", n, kgo.FetchMaxBytes(256<<10))
	next := map[int32]int64{}
	for _, r := range got {
		if r.Offset != next[r.Partition] {
			t.Fatalf("partition %d: offset %d, want %d", r.Partition, r.Offset, next[r.Partition])
		}
		next[r.Partition]++
	}
	if len(got) != n {
		t.Fatalf("%d records, want %d", len(got), n)
	}
}

// A request over 1 MiB is read incrementally; a record batch larger than
// the fetch limits still comes back whole (KIP-74).
func TestLargeRecord(t *testing.T) {
	ts := startServer(t)
	ts.createTopic(t, "huge", 1, map[string]string{"max.message.bytes": fmt.Sprint(4 << 20)})
	cl := ts.client(t, kgo.ProducerBatchMaxBytes(4<<20), kgo.DefaultProduceTopic("huge"))
	value := bytes.Repeat([]byte("0123456789abcdef"), (3<<20)/16)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	got := consume(t, ts, "huge", 1, kgo.FetchMaxBytes(1<<20), kgo.FetchMaxPartitionBytes(1<<20), kgo.BrokerMaxReadBytes(8<<20))
	if !bytes.Equal(got[0].Value, value) {
		t.Fatalf("got %d bytes back, want %d", len(got[0].Value), len(value))
	}
}

func TestErrorCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want *kerr.Error
	}{
		{fmt.Errorf("x: %w", broker.ErrUnknownTopic), kerr.UnknownTopicOrPartition},
		{broker.ErrUnknownPartition, kerr.UnknownTopicOrPartition},
		{broker.ErrTopicExists, kerr.TopicAlreadyExists},
		{broker.ErrInvalidTopic, kerr.InvalidTopicException},
		{broker.ErrInvalidPartitions, kerr.InvalidPartitions},
		{broker.ErrInvalidConfig, kerr.InvalidConfig},
		{broker.ErrRecordTooLarge, kerr.MessageTooLarge},
		{broker.ErrCorruptMessage, kerr.CorruptMessage},
		{broker.ErrInvalidRecord, kerr.InvalidRecord},
		{broker.ErrBatchTooLarge, kerr.RecordListTooLarge},
		{broker.ErrOffsetOutOfRange, kerr.OffsetOutOfRange},
		{seglog.ErrOffsetOutOfRange, kerr.OffsetOutOfRange},
		{fmt.Errorf("%w: disk", broker.ErrStorage), kerr.KafkaStorageError},
		{&seglog.CorruptionError{File: "x", Err: errors.New("bad")}, kerr.KafkaStorageError},
		{broker.ErrClosed, kerr.NotLeaderForPartition},
		{kafkaErrorf(kerr.PolicyViolation, "no"), kerr.PolicyViolation},
		{errors.New("surprise"), kerr.UnknownServerError},
	} {
		if got := errorCode(tc.err); got != tc.want.Code {
			t.Errorf("%v: code %d, want %v", tc.err, got, tc.want)
		}
	}
	if errorCode(nil) != 0 || errorMessage(nil) != nil {
		t.Error("nil error must map to no error")
	}
}
