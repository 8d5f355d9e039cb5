package kafka

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceReq is a one-partition, one-record produce request.
func produceReq(t testing.TB, topic string, partition int32, acks int16, value string) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version = 9
	req.Acks = acks
	req.TimeoutMillis = 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, buildBatch(t, value)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// sent is a request written ahead of reading its response.
type sent struct {
	req  kmsg.Request
	corr int32
}

// recvProduce reads the next response, which must answer s (rawConn.recv
// checks the correlation ID), and returns its only partition.
func (c *rawConn) recvProduce(s sent) kmsg.ProduceResponseTopicPartition {
	c.t.Helper()
	resp := c.recv(s.req, s.corr).(*kmsg.ProduceResponse)
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		c.t.Fatalf("produce %d: %v", s.corr, kerr.ErrorForCode(p.ErrorCode))
	}
	return p
}

// holdAppends installs a testHookBeforeAppend that blocks the first append
// to topic until release is closed, signalling held when it starts to
// wait. Other topics pass through.
func holdAppends(t *testing.T, topic string) (held <-chan struct{}, release chan struct{}) {
	heldCh := make(chan struct{})
	release = make(chan struct{})
	var first atomic.Bool
	hook := func(tp string, _ int32) {
		if tp == topic && first.CompareAndSwap(false, true) {
			close(heldCh)
			<-release
		}
	}
	testHookBeforeAppend.Store(&hook)
	t.Cleanup(func() {
		testHookBeforeAppend.Store(nil)
		select {
		case <-release:
		default:
			close(release)
		}
	})
	return heldCh, release
}

// waitHighWatermark polls until the partition holds want records: there is
// no event for "another connection's request was appended".
func waitHighWatermark(t *testing.T, ts *testServer, topic string, partition int32, want int64) {
	t.Helper()
	p := mustPartition(t, ts, topic, partition)
	deadline := time.Now().Add(10 * time.Second)
	for p.HighWatermark() < want {
		if time.Now().After(deadline) {
			t.Fatalf("%s/%d: high watermark %d, want %d", topic, partition, p.HighWatermark(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// expectNothing asserts the server writes nothing for a while: the one
// place a test must wait for something not to happen.
func (c *rawConn) expectNothing(d time.Duration) {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(d))
	_, err := c.r.Peek(1)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		c.t.Fatalf("the server wrote before it should (read: %v)", err)
	}
}

// Many produce requests in flight on one connection, to a few partitions,
// acks=all and acks=1 mixed: the responses come back in request order and
// each partition holds its records in request order.
func TestPipelinedProduceKeepsOrder(t *testing.T) {
	ts := startServer(t)
	const partitions, requests = 3, 60
	ts.createTopic(t, "pipe", partitions, nil)
	c := ts.dial(t)

	rng := rand.New(rand.NewPCG(1, 2))
	var inFlight []sent
	next := make([]int64, partitions) // the base offset each request must get
	want := make([]int64, requests)
	for i := range requests {
		p := rng.Int32N(partitions)
		acks := []int16{-1, 1}[rng.IntN(2)]
		req := produceReq(t, "pipe", p, acks, fmt.Sprintf("p%d-%d", p, next[p]))
		want[i] = next[p]
		next[p]++
		inFlight = append(inFlight, sent{req, c.send(req)})
	}
	for i, s := range inFlight {
		if got := c.recvProduce(s); got.BaseOffset != want[i] {
			t.Fatalf("request %d to partition %d: base offset %d, want %d", i, got.Partition, got.BaseOffset, want[i])
		}
	}
	for p := range int32(partitions) {
		recs := readPartition(t, ts, "pipe", p, next[p])
		for i, r := range recs {
			if string(r) != fmt.Sprintf("p%d-%d", p, i) {
				t.Fatalf("partition %d offset %d holds %q", p, i, r)
			}
		}
	}
}

// readPartition returns the values of the first n records of a partition.
func readPartition(t *testing.T, ts *testServer, topic string, partition int32, n int64) [][]byte {
	t.Helper()
	var out [][]byte
	for _, r := range consume(t, ts, topic, int(totalCount(t, ts, topic))) {
		if r.Partition == partition {
			out = append(out, r.Value)
		}
	}
	if int64(len(out)) != n {
		t.Fatalf("%s/%d: %d records, want %d", topic, partition, len(out), n)
	}
	return out
}

func totalCount(t *testing.T, ts *testServer, topic string) int64 {
	top, err := ts.b.Topic(topic)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, p := range top.Partitions() {
		n += p.HighWatermark()
	}
	return n
}

// A produce request whose append is slow holds back the responses of the
// requests sent after it, even one that finished first; and a later request
// to the same partition appends after it.
func TestPipelinedProduceSlowFirstAnswersFirst(t *testing.T) {
	ts := startServer(t)
	ts.createTopic(t, "slow", 1, nil)
	ts.createTopic(t, "fast", 1, nil)
	held, release := holdAppends(t, "slow")
	c := ts.dial(t)

	first := produceReq(t, "slow", 0, -1, "first")
	s1 := sent{first, c.send(first)}
	<-held
	second := produceReq(t, "fast", 0, -1, "second")
	s2 := sent{second, c.send(second)}
	third := produceReq(t, "slow", 0, -1, "third")
	s3 := sent{third, c.send(third)}

	// The second request is appended (and fsynced) while the first waits,
	// but its response must not overtake the first's.
	waitHighWatermark(t, ts, "fast", 0, 1)
	c.expectNothing(200 * time.Millisecond)
	if hw := mustPartition(t, ts, "slow", 0).HighWatermark(); hw != 0 {
		t.Fatalf("slow partition has %d records while its first append is held", hw)
	}

	close(release)
	if got := c.recvProduce(s1); got.BaseOffset != 0 {
		t.Fatalf("first: base offset %d", got.BaseOffset)
	}
	if got := c.recvProduce(s2); got.BaseOffset != 0 {
		t.Fatalf("second: base offset %d", got.BaseOffset)
	}
	if got := c.recvProduce(s3); got.BaseOffset != 1 {
		t.Fatalf("third: base offset %d, want 1 (after the first)", got.BaseOffset)
	}
}

// A request that is not a produce waits for the produce requests before it,
// so it sees their records.
func TestRequestAfterPipelinedProducesSeesThem(t *testing.T) {
	ts := startServer(t)
	ts.createTopic(t, "seen", 1, nil)
	held, release := holdAppends(t, "seen")
	c := ts.dial(t)

	var produced []sent
	for i := range 5 {
		req := produceReq(t, "seen", 0, -1, fmt.Sprint(i))
		produced = append(produced, sent{req, c.send(req)})
	}
	list := kmsg.NewPtrListOffsetsRequest()
	list.Version = 4
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "seen"
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp = -1 // latest
	lt.Partitions = append(lt.Partitions, lp)
	list.Topics = append(list.Topics, lt)
	listCorr := c.send(list)

	<-held
	close(release)
	for _, s := range produced {
		c.recvProduce(s)
	}
	resp := c.recv(list, listCorr).(*kmsg.ListOffsetsResponse)
	if off := resp.Topics[0].Partitions[0].Offset; off != 5 {
		t.Fatalf("ListOffsets after 5 produces: latest offset %d", off)
	}
}

// While the first request is held, the server reads only maxInFlight
// requests in all; the rest wait in the socket, and everything is answered
// in order once the first goes through.
func TestPipelineBoundsRequestsInFlight(t *testing.T) {
	ts := startServer(t)
	ts.createTopic(t, "slow", 1, nil)
	ts.createTopic(t, "fast", 1, nil)
	held, release := holdAppends(t, "slow")
	c := ts.dial(t)

	first := produceReq(t, "slow", 0, 1, "first")
	inFlight := []sent{{first, c.send(first)}}
	<-held
	const more = 3 * maxInFlight
	for i := range more {
		req := produceReq(t, "fast", 0, 1, fmt.Sprint(i))
		inFlight = append(inFlight, sent{req, c.send(req)})
	}
	waitHighWatermark(t, ts, "fast", 0, maxInFlight-1)
	c.expectNothing(200 * time.Millisecond)
	if hw := mustPartition(t, ts, "fast", 0).HighWatermark(); hw != maxInFlight-1 {
		t.Fatalf("%d requests appended behind a held one, want %d", hw, maxInFlight-1)
	}

	close(release)
	for _, s := range inFlight {
		c.recvProduce(s)
	}
}

// Shutdown lets pipelined requests already read finish and answers them.
func TestShutdownAnswersPipelinedProduces(t *testing.T) {
	ts := startServer(t)
	ts.createTopic(t, "slow", 1, nil)
	ts.createTopic(t, "fast", 1, nil)
	held, release := holdAppends(t, "slow")
	c := ts.dial(t)

	first := produceReq(t, "slow", 0, -1, "first")
	s1 := sent{first, c.send(first)}
	<-held
	second := produceReq(t, "fast", 0, -1, "second")
	s2 := sent{second, c.send(second)}
	waitHighWatermark(t, ts, "fast", 0, 1) // read and handled before the shutdown

	shutdown := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shutdown <- ts.s.Shutdown(ctx)
	}()
	close(release)
	c.recvProduce(s1)
	c.recvProduce(s2)
	if err := <-shutdown; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	c.expectClosed()
}

// A bad request behind pipelined produces closes the connection only after
// their responses are written.
func TestBadRequestAfterPipelinedProduces(t *testing.T) {
	ts := startServer(t)
	ts.createTopic(t, "slow", 1, nil)
	held, release := holdAppends(t, "slow")
	c := ts.dial(t)

	first := produceReq(t, "slow", 0, -1, "first")
	s1 := sent{first, c.send(first)}
	<-held
	c.write([]byte{0, 0, 0, 10, 0x7f, 0x00, 0, 0, 0, 0, 0, 1, 0, 0}) // unknown API key
	close(release)
	c.recvProduce(s1)
	c.expectClosed()
}

// readFrame reassembles frames larger than what it takes up front, and
// reads small and pooled ones exactly, whether the up-front allowance has
// room (the buffer starts at up to frameUpFront) or not (it starts at
// frameStart).
func TestReadFrameSizes(t *testing.T) {
	sizes := []int{0, 1, 100, frameStart + 1, 64<<10 - 1, 64 << 10, 1<<20 + 3, frameUpFront, frameUpFront + 1, 2*frameUpFront + 12345}
	for _, allowance := range []*requestBudget{nil, newRequestBudget(1)} {
		for _, size := range sizes {
			want := make([]byte, size)
			for i := range want {
				want[i] = byte(i * 7)
			}
			// Garbage in a recycled buffer must not leak into a frame.
			putFrameBuf(bytes.Repeat([]byte{0xee}, 1<<20))
			c := &conn{s: &Server{upFront: allowance}, r: bufio.NewReaderSize(bytes.NewReader(append(want, 0xaa)), 64<<10)}
			got, err := c.readFrame(size)
			if err != nil {
				t.Fatalf("size %d: %v", size, err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("size %d: frame differs", size)
			}
			putFrameBuf(got)
		}
	}
	// A frame cut short is an unexpected EOF.
	c := &conn{s: &Server{}, r: bufio.NewReader(bytes.NewReader(make([]byte, frameUpFront+10)))}
	if _, err := c.readFrame(frameUpFront + 11); err == nil {
		t.Fatal("short frame read without error")
	}
}

func TestFrameShift(t *testing.T) {
	for _, tc := range []struct{ n, shift int }{
		{0, -1}, {64<<10 - 1, -1}, {64 << 10, 16}, {64<<10 + 1, 17}, {1 << 20, 20},
		{1<<20 + 1, 21}, {128 << 20, 27}, {128<<20 + 1, -1},
	} {
		if got := frameShift(tc.n); got != tc.shift {
			t.Errorf("frameShift(%d) = %d, want %d", tc.n, got, tc.shift)
		}
	}
	if b := getFrameBuf(1<<20 + 1); len(b) != 1<<20+1 || cap(b) != 2<<20 {
		t.Errorf("getFrameBuf: len %d cap %d", len(b), cap(b))
	}
}
