package kafka

import (
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"runtime"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// idleConnsMemory opens n connections to addr, each answering one
// ApiVersions round trip when kafka is set (a connection a client has
// started using, as after its handshake), and returns how much the heap and
// goroutine stacks grew per connection, client sockets included. The
// connections are closed at cleanup.
func idleConnsMemory(tb testing.TB, addr string, n int, kafka bool) (heap, stack int64) {
	tb.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "wharf-test", "1"
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("idle")).AppendRequest(nil, req, 1)
	resp := make([]byte, 64<<10)
	conns := make([]net.Conn, 0, n)
	tb.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	before := memInUse()
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			tb.Fatal(err)
		}
		conns = append(conns, c)
		if !kafka {
			continue
		}
		if _, err := c.Write(frame); err != nil {
			tb.Fatal(err)
		}
		if _, err := io.ReadFull(c, resp[:4]); err != nil {
			tb.Fatal(err)
		}
		if _, err := io.ReadFull(c, resp[:binary.BigEndian.Uint32(resp)]); err != nil {
			tb.Fatal(err)
		}
	}
	after := memInUse()
	return (after.heap - before.heap) / int64(n), (after.stack - before.stack) / int64(n)
}

type memUse struct{ heap, stack int64 }

func memInUse() memUse {
	runtime.GC()
	runtime.GC() // a second cycle shrinks the stacks the first found oversized
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memUse{int64(ms.HeapInuse), int64(ms.StackInuse)}
}

// holdingListener accepts connections and holds them without serving:
// the cost of the sockets alone, to subtract from a server's.
func holdingListener(tb testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	tb.Cleanup(func() {
		ln.Close()
		<-done
	})
	return ln.Addr().String()
}

// TestIdleConnMemory measures what one idle Kafka connection costs the
// server, heap and goroutine stacks, beyond the TCP sockets themselves:
// the bench opens 5,000 of them. It was 75 KiB with a 64 KiB read buffer
// per connection; it must stay under 20 KiB.
func TestIdleConnMemory(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes what goroutines and allocations cost")
	}
	const conns = 500
	ts := startServer(t, withServer(func(s *Server) { s.log = slog.New(slog.DiscardHandler) }))
	sockHeap, sockStack := idleConnsMemory(t, holdingListener(t), conns, false)
	heap, stack := idleConnsMemory(t, ts.addr, conns, true)
	perConn := heap + stack - sockHeap - sockStack
	t.Logf("per idle connection: %d bytes (heap %d, stacks %d) beyond %d for the sockets",
		perConn, heap-sockHeap, stack-sockStack, sockHeap+sockStack)
	if perConn > 20<<10 {
		t.Errorf("an idle connection costs %d bytes; want at most 20 KiB", perConn)
	}
}
