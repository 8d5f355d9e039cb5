package tlsconf

import (
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"path/filepath"
	"sync"
	"testing"
)

// countingConn records the size of every write made on it. It is still
// a socket (syscall.Conn) for the Socket's reads.
type countingConn struct {
	*net.TCPConn
	mu     sync.Mutex
	writes []int
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.writes = append(c.writes, len(p))
	c.mu.Unlock()
	return c.TCPConn.Write(p)
}

func (c *countingConn) writeCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.writes)
}

// socketPair is a server tls.Conn over a Socket over a countingConn, and a
// client connected to it over loopback TCP, handshaken.
func socketPair(t testing.TB) (server *tls.Conn, sock *Socket, under *countingConn, client *tls.Conn) {
	t.Helper()
	dir := t.TempDir()
	ca := writeCert(t, dir, "socket")
	r, err := Load(Files{Cert: filepath.Join(dir, "cert.pem"), Key: filepath.Join(dir, "key.pem")})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	client = tls.Client(raw, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	t.Cleanup(func() { client.Close() })
	under = &countingConn{TCPConn: (<-accepted).(*net.TCPConn)}
	server, sock = Server(under, r.ServerConfig())
	t.Cleanup(func() { server.Close() })
	handshaken := make(chan error, 1)
	go func() { handshaken <- server.Handshake() }()
	if err := client.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-handshaken; err != nil {
		t.Fatal(err)
	}
	return server, sock, under, client
}

// readAll reads n bytes from c on a goroutine.
func readAll(c io.Reader, n int) <-chan []byte {
	got := make(chan []byte, 1)
	go func() {
		b := make([]byte, n)
		io.ReadFull(c, b)
		got <- b
	}()
	return got
}

// TestBatchWritesRecordsInLargePieces: 1 MiB written in a Batch arrives
// whole, in writes of seven TLS records each (batchSize) rather than one
// write per 16 KiB record.
func TestBatchWritesRecordsInLargePieces(t *testing.T) {
	server, sock, under, client := socketPair(t)
	msg := make([]byte, 1<<20)
	rand.Read(msg)
	got := readAll(client, len(msg))
	before := under.writeCount()
	err := sock.Batch(func() error {
		// In pieces, as a fetch response is written.
		for rest := msg; len(rest) > 0; rest = rest[min(len(rest), 100<<10):] {
			if _, err := server.Write(rest[:min(len(rest), 100<<10)]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(<-got, msg) {
		t.Fatal("the client read other bytes than were written")
	}
	records := len(msg) / (16 << 10)
	if writes := under.writeCount() - before; writes > records/7+1 {
		t.Fatalf("1 MiB (%d TLS records) took %d socket writes, want at most %d", records, writes, records/7+1)
	}
	if sock.out != nil {
		t.Fatal("the batch buffer is still held after Batch")
	}
}

// TestWriteOutsideBatchIsNotHeld: a write outside Batch (an alert, a
// small response) reaches the peer at once.
func TestWriteOutsideBatchIsNotHeld(t *testing.T) {
	server, _, _, client := socketPair(t)
	got := readAll(client, 4)
	if _, err := server.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	if b := <-got; string(b) != "ping" {
		t.Fatalf("read %q", b)
	}
}

// TestReadAheadDeliversEveryByteAndLetsGo: what the client sends arrives
// whole through the read-ahead, and a drained connection holds no buffer.
func TestReadAheadDeliversEveryByteAndLetsGo(t *testing.T) {
	server, sock, _, client := socketPair(t)
	msg := make([]byte, 3<<20+12345)
	rand.Read(msg)
	sent := make(chan error, 1)
	go func() {
		// Odd sizes, so that records straddle the reads.
		var err error
		for rest := msg; len(rest) > 0 && err == nil; rest = rest[min(len(rest), 7777):] {
			_, err = client.Write(rest[:min(len(rest), 7777)])
		}
		sent <- err
	}()
	// Small reads, as a request's size prefix is read.
	got := make([]byte, 0, len(msg))
	buf := make([]byte, 4096)
	for len(got) < len(msg) {
		n, err := server.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, buf[:n]...)
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatal("the server read other bytes than were sent")
	}
	if sock.inBuf != nil || len(sock.in) != 0 {
		t.Fatalf("a drained connection still holds %d bytes of read-ahead buffer", len(sock.in))
	}
}
