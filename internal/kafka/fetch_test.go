package kafka

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/record"
)

type brokerConfig = broker.Config

func ptr[T any](v T) *T { return &v }

// buildBatch is an uncompressed one-record batch holding value.
func buildBatch(t testing.TB, value string) []byte {
	t.Helper()
	return record.NewBatch(time.Now().UnixMilli(), []record.Record{{Value: []byte(value)}})
}

func mustPartition(t testing.TB, ts *testServer, topic string, i int32) *broker.Partition {
	t.Helper()
	top, err := ts.b.Topic(topic)
	if err != nil {
		t.Fatal(err)
	}
	p, err := top.Partition(i)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// appendBatches writes n batches of one record each of size bytes straight
// to the partition.
func appendBatches(t testing.TB, p *broker.Partition, n, size int) {
	t.Helper()
	for i := 0; i < n; i++ {
		v := strings.Repeat(fmt.Sprintf("%d", i%10), size)
		if _, _, err := p.Produce(record.NewBatch(time.Now().UnixMilli(), []record.Record{{Value: []byte(v)}}), 1); err != nil {
			t.Fatal(err)
		}
	}
}

// fetchRequest fetches one partition (by name, or by ID for v13+ once
// filled in by the caller) without a session and without waiting.
func fetchRequest(version int16, topic string, partition int32, offset int64) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = version
	req.MinBytes = 1
	req.MaxWaitMillis = 0
	req.MaxBytes = 50 << 20
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = partition
	rp.FetchOffset = offset
	rp.PartitionMaxBytes = 10 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// batchOffsets lists the base offsets of the batches in b.
func batchOffsets(t testing.TB, b []byte) []int64 {
	t.Helper()
	var out []int64
	for len(b) > 0 {
		h, err := record.Verify(b)
		if err != nil {
			t.Fatalf("returned batch: %v", err)
		}
		out = append(out, h.BaseOffset)
		b = b[h.Size():]
	}
	return out
}

func TestFetchVersionsAndOffsets(t *testing.T) {
	ts := startServer(t)
	top := ts.createTopic(t, "f", 1, nil)
	p := mustPartition(t, ts, "f", 0)
	appendBatches(t, p, 5, 10)
	c := ts.dial(t)

	for _, v := range []int16{4, 5, 7, 9, 10, 11, 12, 13, 15, 16, 17, 18} {
		req := fetchRequest(v, "f", 0, 2)
		if v >= 13 {
			req.Topics[0].TopicID = top.ID()
		}
		resp := c.roundTrip(req).(*kmsg.FetchResponse)
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("v%d: %+v", v, resp)
		}
		rp := resp.Topics[0].Partitions[0]
		if rp.ErrorCode != 0 || rp.HighWatermark != 5 || rp.LastStableOffset != 5 {
			t.Fatalf("v%d: partition %+v", v, rp)
		}
		if v >= 5 && rp.LogStartOffset != 0 {
			t.Fatalf("v%d: log start %d", v, rp.LogStartOffset)
		}
		if got := batchOffsets(t, rp.RecordBatches); fmt.Sprint(got) != "[2 3 4]" {
			t.Fatalf("v%d: batches at %v", v, got)
		}
		if v >= 13 && resp.Topics[0].TopicID != top.ID() {
			t.Fatalf("v%d: topic id %x", v, resp.Topics[0].TopicID)
		}
	}

	check := func(name string, req *kmsg.FetchRequest, want *kerr.Error) {
		t.Helper()
		resp := c.roundTrip(req).(*kmsg.FetchResponse)
		rp := resp.Topics[0].Partitions[0]
		if rp.ErrorCode != want.Code {
			t.Errorf("%s: error %v, want %v", name, kerr.ErrorForCode(rp.ErrorCode), want)
		}
		if len(rp.RecordBatches) != 0 {
			t.Errorf("%s: records returned with an error", name)
		}
	}
	check("past end", fetchRequest(12, "f", 0, 6), kerr.OffsetOutOfRange)
	check("unknown topic", fetchRequest(12, "nope", 0, 0), kerr.UnknownTopicOrPartition)
	check("unknown partition", fetchRequest(12, "f", 3, 0), kerr.UnknownTopicOrPartition)
	byID := fetchRequest(13, "", 0, 0)
	byID.Topics[0].TopicID = [16]byte{9}
	check("unknown topic id", byID, kerr.UnknownTopicID)
	fenced := fetchRequest(12, "f", 0, 0)
	fenced.Topics[0].Partitions[0].CurrentLeaderEpoch = 5
	check("future leader epoch", fenced, kerr.UnknownLeaderEpoch)

	if _, err := p.DeleteBefore(3); err != nil {
		t.Fatal(err)
	}
	check("below log start", fetchRequest(12, "f", 0, 1), kerr.OffsetOutOfRange)

	atEnd := c.roundTrip(fetchRequest(12, "f", 0, 5)).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if atEnd.ErrorCode != 0 || len(atEnd.RecordBatches) != 0 || atEnd.RecordBatches == nil || atEnd.LogStartOffset != 3 {
		t.Errorf("at end: %+v", atEnd)
	}
}

// KIP-74: the first partition with data returns at least one batch even
// over the limits; later ones never exceed what is left.
func TestFetchSizeLimits(t *testing.T) {
	ts := startServer(t)
	ts.createTopic(t, "big", 2, nil)
	appendBatches(t, mustPartition(t, ts, "big", 0), 3, 3000)
	appendBatches(t, mustPartition(t, ts, "big", 1), 3, 3000)
	c := ts.dial(t)

	req := fetchRequest(12, "big", 0, 0)
	second := kmsg.NewFetchRequestTopicPartition()
	second.Partition, second.PartitionMaxBytes = 1, 10<<20
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, second)

	req.MaxBytes = 100 // less than one batch
	resp := c.roundTrip(req).(*kmsg.FetchResponse)
	ps := resp.Topics[0].Partitions
	if n := len(batchOffsets(t, ps[0].RecordBatches)); n != 1 {
		t.Errorf("first partition over MaxBytes: %d batches, want 1", n)
	}
	if n := len(ps[1].RecordBatches); n != 0 {
		t.Errorf("second partition returned %d bytes past MaxBytes", n)
	}
	if ps[1].HighWatermark != 3 {
		t.Errorf("second partition high watermark %d", ps[1].HighWatermark)
	}

	req.MaxBytes = 50 << 20
	req.Topics[0].Partitions[0].PartitionMaxBytes = 7000 // two batches of ~3070
	resp = c.roundTrip(req).(*kmsg.FetchResponse)
	ps = resp.Topics[0].Partitions
	if n := len(batchOffsets(t, ps[0].RecordBatches)); n != 2 {
		t.Errorf("PartitionMaxBytes 7000: %d batches, want 2", n)
	}
	if n := len(batchOffsets(t, ps[1].RecordBatches)); n != 3 {
		t.Errorf("second partition: %d batches, want 3", n)
	}
}

// A fetch parked with MaxWait 10s returns as soon as a record arrives.
func TestFetchLongPollWakesOnProduce(t *testing.T) {
	waiting := make(chan struct{}, 1)
	ts := startServer(t, withServer(func(s *Server) {
		s.testHookFetchWaiting = func() {
			select {
			case waiting <- struct{}{}:
			default:
			}
		}
	}))
	ts.createTopic(t, "poll", 2, nil)
	c := ts.dial(t)
	req := fetchRequest(12, "poll", 0, 0)
	other := kmsg.NewFetchRequestTopicPartition()
	other.Partition, other.PartitionMaxBytes = 1, 1<<20
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, other)
	req.MaxWaitMillis = 10_000

	start := time.Now()
	corr := c.send(req)
	<-waiting
	appendBatches(t, mustPartition(t, ts, "poll", 1), 1, 10)
	resp := c.recv(req, corr).(*kmsg.FetchResponse)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("fetch returned after %v", d)
	}
	ps := resp.Topics[0].Partitions
	if len(ps) != 2 || len(ps[0].RecordBatches) != 0 || len(batchOffsets(t, ps[1].RecordBatches)) != 1 {
		t.Fatalf("response: %+v", ps)
	}

	// MinBytes not reached: the fetch waits out MaxWait and answers empty.
	req.MaxWaitMillis = 200
	req.MinBytes = 1 << 20
	req.Topics[0].Partitions[1].FetchOffset = 1
	start = time.Now()
	resp = c.roundTrip(req).(*kmsg.FetchResponse)
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Fatalf("MinBytes fetch returned after %v, before MaxWait", d)
	}
	if n := len(resp.Topics[0].Partitions[0].RecordBatches); n != 0 {
		t.Fatalf("%d bytes", n)
	}
}

func TestFetchSessions(t *testing.T) {
	ts := startServer(t)
	ts.createTopic(t, "s", 3, nil)
	for i := int32(0); i < 3; i++ {
		appendBatches(t, mustPartition(t, ts, "s", i), 2, 10)
	}
	c := ts.dial(t)

	full := kmsg.NewPtrFetchRequest()
	full.Version = 12
	full.MaxBytes = 1 << 20
	full.SessionID, full.SessionEpoch = 0, 0
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "s"
	for i := int32(0); i < 3; i++ {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes = i, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
	}
	full.Topics = []kmsg.FetchRequestTopic{rt}
	resp := c.roundTrip(full).(*kmsg.FetchResponse)
	if resp.SessionID == 0 || resp.ErrorCode != 0 {
		t.Fatalf("no session created: id %d error %d", resp.SessionID, resp.ErrorCode)
	}
	if n := len(resp.Topics[0].Partitions); n != 3 {
		t.Fatalf("full response has %d partitions", n)
	}
	id := resp.SessionID

	incremental := func(epoch int32, topics []kmsg.FetchRequestTopic, forgotten []kmsg.FetchRequestForgottenTopic) *kmsg.FetchResponse {
		req := kmsg.NewPtrFetchRequest()
		req.Version = 12
		req.MaxBytes = 1 << 20
		req.SessionID, req.SessionEpoch = id, epoch
		req.Topics, req.ForgottenTopics = topics, forgotten
		return c.roundTrip(req).(*kmsg.FetchResponse)
	}
	partitionsOf := func(resp *kmsg.FetchResponse) []int32 {
		var out []int32
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				out = append(out, p.Partition)
			}
		}
		return out
	}

	// Move every partition to the end of its data: each changed its fetch
	// offset, and the full response told them HW 2, so nothing is news.
	moved := rt
	moved.Partitions = append([]kmsg.FetchRequestTopicPartition(nil), rt.Partitions...)
	for i := range moved.Partitions {
		moved.Partitions[i].FetchOffset = 2
	}
	resp = incremental(1, []kmsg.FetchRequestTopic{moved}, nil)
	if resp.SessionID != id || resp.ErrorCode != 0 || len(partitionsOf(resp)) != 0 {
		t.Fatalf("epoch 1: session %d error %d partitions %v", resp.SessionID, resp.ErrorCode, partitionsOf(resp))
	}

	// New data on partition 1 only: the incremental answer holds just it.
	appendBatches(t, mustPartition(t, ts, "s", 1), 1, 10)
	resp = incremental(2, nil, nil)
	if got := partitionsOf(resp); fmt.Sprint(got) != "[1]" {
		t.Fatalf("epoch 2: partitions %v, want [1]", got)
	}
	if offs := batchOffsets(t, resp.Topics[0].Partitions[0].RecordBatches); fmt.Sprint(offs) != "[2]" {
		t.Fatalf("epoch 2: batches %v", offs)
	}

	// Forget partition 1 (its session offset, 2, still has data): it is
	// no longer answered, even when more data arrives.
	resp = incremental(3, nil, []kmsg.FetchRequestForgottenTopic{{Topic: "s", Partitions: []int32{1}}})
	if got := partitionsOf(resp); len(got) != 0 {
		t.Fatalf("epoch 3: partitions %v, want none", got)
	}
	appendBatches(t, mustPartition(t, ts, "s", 1), 1, 10)
	if got := partitionsOf(incremental(4, nil, nil)); len(got) != 0 {
		t.Fatalf("epoch 4 after forgetting: partitions %v", got)
	}

	// A log start change is news too.
	if _, err := mustPartition(t, ts, "s", 0).DeleteBefore(1); err != nil {
		t.Fatal(err)
	}
	if got := partitionsOf(incremental(5, nil, nil)); fmt.Sprint(got) != "[0]" {
		t.Fatalf("epoch 5 after DeleteRecords: partitions %v", got)
	}

	if resp := incremental(9, nil, nil); resp.ErrorCode != kerr.InvalidFetchSessionEpoch.Code {
		t.Fatalf("wrong epoch: error %d", resp.ErrorCode)
	}
	// Closing the session (epoch -1) makes a sessionless full fetch.
	closing := kmsg.NewPtrFetchRequest()
	closing.Version = 12
	closing.MaxBytes = 1 << 20
	closing.SessionID, closing.SessionEpoch = id, -1
	closing.Topics = []kmsg.FetchRequestTopic{rt}
	resp = c.roundTrip(closing).(*kmsg.FetchResponse)
	if resp.SessionID != 0 || len(partitionsOf(resp)) != 3 {
		t.Fatalf("close: session %d partitions %v", resp.SessionID, partitionsOf(resp))
	}
	if resp := incremental(6, nil, nil); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("closed session: error %d", resp.ErrorCode)
	}
}

func TestFetchSessionCacheBound(t *testing.T) {
	fs := newFetchSessions(2, time.Minute)
	now := time.Unix(1000, 0)
	fs.now = func() time.Time { return now }
	a := fs.create(nil, false)
	a.mu.Unlock()
	b := fs.create(nil, false)
	b.mu.Unlock()
	if c := fs.create(nil, false); c != nil {
		t.Fatal("third session created in a full cache of fresh sessions")
	}
	now = now.Add(2 * time.Minute)
	if s := fs.lookup(b.id); s == nil {
		t.Fatal("session b lost")
	} else {
		s.mu.Unlock()
	}
	c := fs.create(nil, false)
	if c == nil {
		t.Fatal("idle session not evicted")
	}
	c.mu.Unlock()
	if s := fs.lookup(a.id); s != nil {
		t.Fatal("the least recently used session survived")
	}
}

// Fetch below v10 cannot carry zstd: such data is UNSUPPORTED_COMPRESSION_TYPE.
func TestFetchOldVersionZstd(t *testing.T) {
	ts := startServer(t)
	ts.createTopic(t, "z", 1, nil)
	cl := ts.client(t, kgo.ProducerBatchCompression(kgo.ZstdCompression()), kgo.DisableIdempotentWrite())
	produceSync(t, cl, "z", 0, strings.Repeat("compress me ", 100))
	c := ts.dial(t)
	if rp := c.roundTrip(fetchRequest(9, "z", 0, 0)).(*kmsg.FetchResponse).Topics[0].Partitions[0]; rp.ErrorCode != kerr.UnsupportedCompressionType.Code {
		t.Fatalf("v9: error %d", rp.ErrorCode)
	}
	if rp := c.roundTrip(fetchRequest(10, "z", 0, 0)).(*kmsg.FetchResponse).Topics[0].Partitions[0]; rp.ErrorCode != 0 || len(rp.RecordBatches) == 0 {
		t.Fatalf("v10: error %d, %d bytes", rp.ErrorCode, len(rp.RecordBatches))
	}
}

// The sendfile path must put exactly the bytes on the wire that the copy
// path (plain kmsg encoding) does, for flexible and non-flexible versions.
func TestZeroCopyMatchesCopyPath(t *testing.T) {
	ts := startServer(t)
	top := ts.createTopic(t, "zc", 3, nil)
	appendBatches(t, mustPartition(t, ts, "zc", 0), 20, 2000)
	appendBatches(t, mustPartition(t, ts, "zc", 2), 30, 1000)

	for _, v := range []int16{11, 12, 13} {
		req := fetchRequest(v, "zc", 0, 0)
		req.Topics[0].TopicID = top.ID()
		for _, i := range []int32{1, 2} {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.PartitionMaxBytes = i, 10<<20
			req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
		}
		var frames [2][]byte
		for i, zeroCopy := range []bool{true, false} {
			ts.s.zeroCopy.Store(zeroCopy)
			c := ts.dial(t)
			c.send(req)
			frame, err := c.readFrame()
			if err != nil {
				t.Fatal(err)
			}
			frames[i] = frame
		}
		if !bytes.Equal(frames[0], frames[1]) {
			t.Fatalf("v%d: zero-copy response (%d bytes) differs from copied (%d bytes)", v, len(frames[0]), len(frames[1]))
		}
		if len(frames[0]) < 60000 {
			t.Fatalf("v%d: only %d bytes; the test wants the zero-copy path", v, len(frames[0]))
		}
	}
	ts.s.zeroCopy.Store(true)
}

func TestPlanSpliceRejectsMisplacedMarker(t *testing.T) {
	m := newMarkerSource()
	marker := m.marker(0)
	// The marker without the length kmsg would have written before it.
	buf := append([]byte{0, 0, 0, 0, 0, 0, 0, 99}, marker...)
	if _, err := planSplice(buf, [][]byte{marker}, false); err == nil {
		t.Fatal("marker with a wrong length field accepted")
	}
	if _, err := planSplice([]byte{0, 0, 0, 0, 1, 2, 3}, [][]byte{marker}, true); err == nil {
		t.Fatal("missing marker accepted")
	}
}
