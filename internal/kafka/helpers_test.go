package kafka

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/broker"
)

// testServer is a Server on 127.0.0.1:0 in front of a broker in a temp dir.
type testServer struct {
	s      *Server
	b      *broker.Broker
	addr   string
	served chan error // Serve's result
}

type serverOption func(*broker.Config, *Server)

func withBrokerConfig(fn func(*broker.Config)) serverOption {
	return func(c *broker.Config, _ *Server) { fn(c) }
}

func withServer(fn func(*Server)) serverOption {
	return func(_ *broker.Config, s *Server) {
		if s != nil {
			fn(s)
		}
	}
}

// startServer starts a server and registers its shutdown with t.Cleanup.
func startServer(t testing.TB, opts ...serverOption) *testServer {
	t.Helper()
	logger := testLogger(t)
	bcfg := broker.Config{DataDir: t.TempDir(), Logger: logger}
	for _, o := range opts {
		o(&bcfg, nil)
	}
	b, err := broker.Open(bcfg)
	if err != nil {
		t.Fatalf("open broker: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Close()
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	s := NewServer(b, Config{AdvertisedHost: "127.0.0.1", AdvertisedPort: int32(port), Logger: logger})
	for _, o := range opts {
		o(&broker.Config{}, s) // the broker config is already used
	}
	ts := &testServer{s: s, b: b, addr: ln.Addr().String(), served: make(chan error, 1)}
	go func() { ts.served <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-ts.served; err != nil {
			t.Errorf("serve returned %v", err)
		}
		if err := b.Close(); err != nil {
			t.Errorf("close broker: %v", err)
		}
	})
	return ts
}

// client returns a kgo client for the server, closed at cleanup.
func (ts *testServer) client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(ts.addr), kgo.MetadataMinAge(50 * time.Millisecond)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func (ts *testServer) admin(t testing.TB) *kadm.Client {
	return kadm.NewClient(ts.client(t))
}

// createTopic creates a topic through the broker core directly.
func (ts *testServer) createTopic(t testing.TB, name string, partitions int32, configs map[string]string) *broker.Topic {
	t.Helper()
	top, err := ts.b.CreateTopic(broker.TopicSpec{Name: name, Partitions: partitions, Configs: configs}, false)
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	return top
}

// testLogger sends the server's log to t.Log and fails the test on an
// Error-level record (e.g. a recovered panic). It goes quiet at cleanup,
// since logging after a test ends panics.
func testLogger(t testing.TB) *slog.Logger {
	h := &testLogHandler{t: t, mu: new(sync.Mutex), done: new(bool)}
	t.Cleanup(func() {
		h.mu.Lock()
		*h.done = true
		h.mu.Unlock()
	})
	return slog.New(h)
}

type testLogHandler struct {
	t     testing.TB
	mu    *sync.Mutex
	done  *bool
	attrs []slog.Attr
}

func (h *testLogHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *testLogHandler) Handle(_ context.Context, r slog.Record) error {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s %s", r.Level, r.Message)
	for _, a := range h.attrs {
		fmt.Fprintf(&sb, " %s=%v", a.Key, a.Value)
	}
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&sb, " %s=%v", a.Key, a.Value)
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	if *h.done {
		return nil
	}
	if r.Level >= slog.LevelError {
		h.t.Errorf("error logged: %s", sb.String())
	} else {
		h.t.Log(sb.String())
	}
	return nil
}

func (h *testLogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), attrs...)
	return &c
}

func (h *testLogHandler) WithGroup(string) slog.Handler { return h }

// rawConn speaks the Kafka protocol by hand (with kmsg encoding), so tests
// can pin request versions and see exactly what the server writes.
type rawConn struct {
	t    testing.TB
	nc   net.Conn
	r    *bufio.Reader
	corr int32
}

func (ts *testServer) dial(t testing.TB) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc, r: bufio.NewReader(nc)}
}

// send writes req at its set version and returns the correlation ID used.
func (c *rawConn) send(req kmsg.Request) int32 {
	c.t.Helper()
	c.corr++
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("wharf-test")).AppendRequest(nil, req, c.corr)
	c.write(frame)
	return c.corr
}

func (c *rawConn) write(b []byte) {
	c.t.Helper()
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// readFrame reads one size-prefixed response.
func (c *rawConn) readFrame() ([]byte, error) {
	c.nc.SetReadDeadline(time.Now().Add(15 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(c.r, size[:]); err != nil {
		return nil, err
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err := io.ReadFull(c.r, frame)
	return frame, err
}

// recv reads the response to req (sent with correlation ID corr).
func (c *rawConn) recv(req kmsg.Request, corr int32) kmsg.Response {
	c.t.Helper()
	frame, err := c.readFrame()
	if err != nil {
		c.t.Fatalf("read response: %v", err)
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if got := int32(binary.BigEndian.Uint32(frame)); got != corr {
		c.t.Fatalf("correlation ID %d, want %d", got, corr)
	}
	body := frame[4:]
	if resp.IsFlexible() && resp.Key() != int16(kmsg.ApiVersions) {
		if len(body) == 0 || body[0] != 0 {
			c.t.Fatalf("flexible response header without empty tag section")
		}
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		c.t.Fatalf("decode %T: %v", resp, err)
	}
	return resp
}

func (c *rawConn) roundTrip(req kmsg.Request) kmsg.Response {
	c.t.Helper()
	return c.recv(req, c.send(req))
}

// expectClosed asserts the server closes the connection without a reply.
func (c *rawConn) expectClosed() {
	c.t.Helper()
	frame, err := c.readFrame()
	if err == nil {
		c.t.Fatalf("got a %d-byte response; want the connection closed", len(frame))
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		c.t.Fatalf("connection still open: %v", err)
	}
}

// produceSync produces values to topic/partition and fails on error.
func produceSync(t testing.TB, cl *kgo.Client, topic string, partition int32, values ...string) {
	t.Helper()
	var recs []*kgo.Record
	for _, v := range values {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: partition, Value: []byte(v)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// consume reads n records of topic from the start with a fresh client.
func consume(t testing.TB, ts *testServer, topic string, n int, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	opts = append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)
	cl := ts.client(t, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records before timeout", len(out), n)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		out = append(out, fs.Records()...)
	}
	return out
}
