package seglog

import (
	"bytes"
	"io"
	"net"
	"sync"
	"testing"
)

// TestWriteToTCPConcurrently sends the same segment ranges to several TCP
// connections at once: with a shared file offset (the net package's
// sendfile path) the streams would interleave.
func TestWriteToTCPConcurrently(t *testing.T) {
	l := mustOpen(t, t.TempDir(), smallConfig())
	defer l.Close()
	appendBatches(t, l, 150, 3, 0)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const conns = 6
	received := make(chan []byte, conns)
	var servers sync.WaitGroup
	for range conns {
		servers.Add(1)
		go func() {
			defer servers.Done()
			c, err := ln.Accept()
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			b, err := io.ReadAll(c)
			if err != nil {
				t.Error(err)
			}
			received <- b
		}()
	}

	s, err := l.Read(0, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	want, _ := s.Bytes()
	var clients sync.WaitGroup
	for range conns {
		clients.Add(1)
		go func() {
			defer clients.Done()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			for range 3 {
				if n, err := s.WriteTo(c); err != nil || n != s.Len() {
					t.Errorf("WriteTo: %d, %v", n, err)
					return
				}
			}
		}()
	}
	clients.Wait()
	servers.Wait()
	close(received)
	full := bytes.Repeat(want, 3)
	for b := range received {
		if !bytes.Equal(b, full) {
			t.Fatalf("a connection received %d bytes that differ from the slice (%d bytes x3)", len(b), len(want))
		}
	}
}
