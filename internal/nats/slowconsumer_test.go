package nats_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

const (
	slowMaxPending = 1 << 20
	floodMsgSize   = 32 << 10
	floodMsgs      = 2048 // 64 MiB: far more than the pending limit and any socket buffers
)

// stalledSubscriber subscribes to subject over a raw connection and then
// reads nothing more, as a client that hangs does.
func stalledSubscriber(t *testing.T, s server, subject string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// A small receive buffer, so that the server's side fills sooner.
	c.(*net.TCPConn).SetReadBuffer(64 << 10)
	c.SetDeadline(time.Now().Add(testTimeout))
	r := bufio.NewReader(c)
	r.ReadString('\n') // INFO
	fmt.Fprintf(c, "CONNECT {\"verbose\":false}\r\nSUB %s 1\r\nPING\r\n", subject)
	if line, err := r.ReadString('\n'); line != "PONG\r\n" {
		t.Fatalf("%s: stalled subscriber got %q, %v", s.name, line, err)
	}
	return c
}

// closedByServer reads (and discards) what c has until the server closes
// it, and reports how much that was.
func closedByServer(c net.Conn) (int64, error) {
	c.SetReadDeadline(time.Now().Add(testTimeout))
	n, err := io.Copy(io.Discard, c)
	if err != nil && !isClosed(err) {
		return n, err
	}
	return n, nil
}

// TestSlowConsumer floods a subscriber that stopped reading: the server
// cuts it off, and the publisher and a healthy subscriber carry on, on
// both servers.
func TestSlowConsumer(t *testing.T) {
	t.Parallel()
	// The healthy subscriber must stay within the pending limit of the
	// flood: 8 MiB and a 2 s write deadline leave room for a starved
	// scheduler on a loaded machine (at 1 MiB it was cut off as slow too),
	// and the 64 MiB flood still overruns the stalled one many times over.
	for _, s := range bothServers(t, limits{maxPending: 8 * slowMaxPending, writeDeadline: 2 * time.Second}) {
		stalled := stalledSubscriber(t, s, "flood")
		healthy := connect(t, s)
		var got atomic.Int64
		done := make(chan struct{})
		healthy.Subscribe("flood", func(*nats.Msg) {
			if got.Add(1) == floodMsgs {
				close(done)
			}
		})
		healthy.Flush()
		pub := connect(t, s)
		body := make([]byte, floodMsgSize)
		for range floodMsgs {
			if err := pub.Publish("flood", body); err != nil {
				t.Fatalf("%s: publish: %v", s.name, err)
			}
		}
		if err := pub.Flush(); err != nil {
			t.Fatalf("%s: publisher: %v", s.name, err)
		}
		read, err := closedByServer(stalled)
		if err != nil {
			t.Fatalf("%s: stalled subscriber not cut off: %v", s.name, err)
		}
		if read >= floodMsgs*floodMsgSize {
			t.Errorf("%s: stalled subscriber still got everything (%d bytes)", s.name, read)
		}
		select {
		case <-done:
		case <-time.After(testTimeout):
			t.Fatalf("%s: healthy subscriber got %d of %d", s.name, got.Load(), floodMsgs)
		}
		if !pub.IsConnected() || !healthy.IsConnected() {
			t.Errorf("%s: publisher connected %v, healthy subscriber connected %v", s.name, pub.IsConnected(), healthy.IsConnected())
		}
	}
}

// TestSlowConsumerMemoryBounded floods a stalled subscriber with 64 times
// its pending limit and checks that Wharf's heap grows by a few times the
// limit at most, not with the backlog.
func TestSlowConsumerMemoryBounded(t *testing.T) {
	s := startWharf(t, limits{maxPending: slowMaxPending})
	stalled := stalledSubscriber(t, s, "flood")
	pub := connect(t, s)
	body := make([]byte, floodMsgSize)

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base, peak := ms.HeapInuse, ms.HeapInuse
	for i := range floodMsgs {
		if err := pub.Publish("flood", body); err != nil {
			t.Fatal(err)
		}
		if i%64 == 0 {
			pub.Flush() // the server has taken in what was published
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
		}
	}
	if err := pub.Flush(); err != nil {
		t.Fatal(err)
	}
	const published = floodMsgs * floodMsgSize
	growth := int64(peak) - int64(base)
	t.Logf("published %d MiB to a stalled subscriber; heap peaked %.1f MiB above the start", published>>20, float64(growth)/(1<<20))
	if bound := int64(4*slowMaxPending + 8<<20); growth > bound {
		t.Errorf("heap grew by %d bytes while %d were published; bound %d", growth, published, bound)
	}
	if _, err := closedByServer(stalled); err != nil {
		t.Fatalf("stalled subscriber not cut off: %v", err)
	}
}
