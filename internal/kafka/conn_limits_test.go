package kafka

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// logLines is a slog handler keeping each record as one line.
type logLines struct {
	mu    sync.Mutex
	lines []string
	attrs []slog.Attr
	all   *logLines // the handler the lines go to
}

func newLogLines() *logLines {
	l := &logLines{}
	l.all = l
	return l
}

func (l *logLines) Enabled(context.Context, slog.Level) bool { return true }

func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	var sb strings.Builder
	sb.WriteString(r.Message)
	for _, a := range l.attrs {
		fmt.Fprintf(&sb, " %s=%v", a.Key, a.Value)
	}
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&sb, " %s=%v", a.Key, a.Value)
		return true
	})
	l.all.mu.Lock()
	l.all.lines = append(l.all.lines, sb.String())
	l.all.mu.Unlock()
	return nil
}

func (l *logLines) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &logLines{attrs: append(append([]slog.Attr(nil), l.attrs...), attrs...), all: l.all}
}

func (l *logLines) WithGroup(string) slog.Handler { return l }

// find returns the first line containing every one of parts.
func (l *logLines) find(parts ...string) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
next:
	for _, line := range l.lines {
		for _, p := range parts {
			if !strings.Contains(line, p) {
				continue next
			}
		}
		return line, true
	}
	return "", false
}

// metadataOfSize is a Metadata request listing enough topics to be about
// size bytes (each takes 44).
func metadataOfSize(size int) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	for i := 0; i*44 < size; i++ {
		rt := kmsg.NewMetadataRequestTopic()
		name := fmt.Sprintf("topic-%020d", i)
		rt.Topic = &name
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// Requests other than Produce are held to MaxNonProduceRequestBytes: a
// larger one closes the connection with a log line naming the client,
// while a produce request of the same size is served.
func TestNonProduceRequestLimit(t *testing.T) {
	const limit = 16 << 10
	logs := newLogLines()
	ts := startServer(t, withServer(func(s *Server) {
		s.cfg.MaxNonProduceRequestBytes = limit
		s.log = slog.New(logs)
	}))
	ts.createTopic(t, "limits", 1, map[string]string{"max.message.bytes": "1048576"})

	ok := ts.dial(t)
	ok.roundTrip(metadataOfSize(limit - 1024))
	produce := produceReq(t, "limits", 0, 1, strings.Repeat("p", 2*limit))
	ok.recvProduce(sent{produce, ok.send(produce)})

	tooBig := ts.dial(t)
	tooBig.send(metadataOfSize(limit + 1024))
	tooBig.expectClosed()
	line, found := logs.find("request too large", "Metadata", `client_id "wharf-test"`, "remote=")
	if !found {
		t.Fatalf("no log line names the client of the refused request; got %q", logs.lines)
	}
	t.Log(line)
	ok.roundTrip(kmsg.NewPtrApiVersionsRequest()) // the neighbour is unaffected
}

// sendHostile writes a size prefix and frame on a new connection and waits
// for the server to close it.
func sendHostile(t *testing.T, addr string, frame []byte) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	go func() {
		// The server may close before reading it all. Two writes: a
		// copy of the frame would count as the server's allocation.
		if _, err := nc.Write(binary.BigEndian.AppendUint32(nil, uint32(len(frame)))); err == nil {
			nc.Write(frame)
		}
	}()
	nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	n, err := io.Copy(io.Discard, nc)
	if ne, ok := err.(net.Error); (ok && ne.Timeout()) || n != 0 {
		// A reset is a close too: the server closed with the
		// request's bytes unread.
		t.Fatalf("the server answered %d bytes or kept the connection open (%v)", n, err)
	}
}

// Hostile requests built for the most allocation kmsg can be made to do
// are refused, or decoded within their bound, without the server
// allocating gigabytes, while a franz-go client on the same server keeps
// producing and consuming.
func TestHostileRequestsDoNotAllocate(t *testing.T) {
	ts := startServer(t)
	ts.createTopic(t, "neighbours", 1, nil)
	cl := ts.client(t)
	stop := make(chan struct{})
	neighbourDone := make(chan int, 1)
	go func() { // a neighbour producing throughout
		n := 0
		defer func() { neighbourDone <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			err := cl.ProduceSync(ctx, &kgo.Record{Topic: "neighbours", Value: []byte(fmt.Sprint(n))}).FirstErr()
			cancel()
			if err != nil {
				t.Errorf("neighbour produce %d: %v", n, err)
				return
			}
			n++
		}
	}()
	stopNeighbour := sync.OnceValue(func() int {
		close(stop)
		return <-neighbourDone
	})
	t.Cleanup(func() { stopNeighbour() }) // before the client closes

	for _, tc := range []struct {
		name     string
		frame    []byte
		maxAlloc uint64
		unbound  float64 // measured amplification without the bounds
	}{
		// Over the 1 MiB limit for non-produce requests: refused unread.
		{"OffsetFetch v8 of 8 MiB", hostileOffsetFetch(8 << 20), 16 << 20, 93},
		// At the limit: decoded, within 96 times its size.
		{"OffsetFetch v8 of 1 MiB", hostileOffsetFetch(1<<20 - 64), 128 << 20, 93},
		// Produce keeps 100 MiB: refused by the skeleton walk, after
		// reading the frame into buffers that double as it arrives.
		{"Produce v9 of 64 MiB", hostileProduce(64 << 20), 400 << 20, 79},
		{"Produce v9 of 32 MiB of empty topics", sparseProduce(32 << 20), 200 << 20, 21},
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		sendHostile(t, ts.addr, tc.frame)
		runtime.ReadMemStats(&after)
		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("%s (%d bytes): server allocated %d MiB; kmsg unbound: about %d MiB",
			tc.name, len(tc.frame), alloc>>20, int64(tc.unbound*float64(len(tc.frame)))>>20)
		if alloc > tc.maxAlloc && !raceEnabled { // race instrumentation doubles kmsg's arrays
			t.Errorf("%s: %d MiB allocated, want at most %d MiB", tc.name, alloc>>20, tc.maxAlloc>>20)
		}
	}
	if stopNeighbour() == 0 {
		t.Error("the neighbour produced nothing")
	}
	consume(t, ts, "neighbours", 1)
}
