package amqp

import (
	"bufio"
	"log/slog"
	"net"
	"runtime"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// idleConnBudget is what an idle connection (one channel, heartbeats on)
// may cost the server in heap and stacks. The bench opens thousands.
const idleConnBudget = 30 << 10

// inUse is the heap and stack memory in use after a full collection.
func inUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse + ms.StackInuse
}

// dialIdle opens a connection with one channel and returns the socket
// only: the client keeps no buffers or goroutines, so what the
// connections add to the process is the server's share (and two sockets).
func dialIdle(t testing.TB, addr string, heartbeat uint16) net.Conn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(testTimeout))
	c := &rawClient{t: t, nc: nc, fr: amqpwire.NewFrameReader(bufio.NewReaderSize(nc, 512), 0), w: amqpwire.NewWriter(nc, 512)}
	c.handshake(heartbeat)
	c.openChannel(1)
	nc.SetDeadline(time.Time{})
	return nc
}

// An idle connection with one open channel costs the server at most
// idleConnBudget bytes of heap and stack.
func TestIdleConnectionMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 500 connections")
	}
	if raceEnabled {
		t.Skip("the race detector inflates memory")
	}
	const conns = 500
	b := startBroker(t, func(c *Config) { c.Logger = slog.New(slog.DiscardHandler) })
	dialIdle(t, b.addr, 10) // warm up: first-use allocations are not per connection
	before := inUse()
	for range conns {
		dialIdle(t, b.addr, 10)
	}
	per := (int64(inUse()) - int64(before)) / conns
	t.Logf("%d bytes per idle connection (heap + stack, server and client sockets)", per)
	if per > idleConnBudget {
		t.Errorf("an idle connection costs %d bytes, budget %d", per, idleConnBudget)
	}
}

// A connection lends its buffers back between bursts: messages of every
// size, each published after the connection went quiet (its confirm
// awaited), arrive intact, including bodies far larger than the read and
// write buffers.
func TestBuffersLentBetweenBursts(t *testing.T) {
	b := startBroker(t)
	pub := newConfirmedPublisher(t, b.channel())
	sub := b.channel()
	declareQueue(t, sub, "q", false)
	sizes := []int{0, 1, readBufferSize - 100, readBufferSize, 3*readBufferSize + 7, 1 << 20}
	for i, size := range sizes {
		body := make([]byte, size)
		for j := range body {
			body[j] = byte(i + j)
		}
		if !pub.publish("", "q", amqp091.Publishing{Body: body}) {
			t.Fatalf("message %d nacked", i)
		}
	}
	deliveries := consume(t, sub, "q", true)
	for i, size := range sizes {
		d := next(t, deliveries)
		if len(d.Body) != size {
			t.Fatalf("message %d: %d bytes, want %d", i, len(d.Body), size)
		}
		for j, c := range d.Body {
			if c != byte(i+j) {
				t.Fatalf("message %d: byte %d is %d, want %d", i, j, c, byte(i+j))
			}
		}
	}
}
