package kafka

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// selfSignedTLS is a server configuration for 127.0.0.1 and a client one
// that trusts it.
func selfSignedTLS(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "wharf"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}},
		&tls.Config{RootCAs: pool}
}

// TestFetchOverTLSStreamsRecordData: record data too large for the copy
// path goes through the encryption straight from the files and arrives
// whole and in order.
func TestFetchOverTLSStreamsRecordData(t *testing.T) {
	ts := startServer(t)
	serverTLS, clientTLS := selfSignedTLS(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := int32(ln.Addr().(*net.TCPAddr).Port)
	go ts.s.ServeListener(ln, Listener{Protocol: SSL, AdvertisedHost: "127.0.0.1", AdvertisedPort: port, TLS: serverTLS})
	ts.createTopic(t, "sealed", 1, nil)

	const n = 300
	var values []string
	for i := range n {
		values = append(values, fmt.Sprintf("%04d-%01000d", i, i))
	}
	produceSync(t, ts.client(t), "sealed", 0, values...)
	cl, err := kgo.NewClient(kgo.SeedBrokers(ln.Addr().String()), kgo.DialTLSConfig(clientTLS),
		kgo.ConsumeTopics("sealed"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []string
	ctx := testCtx(t)
	for len(got) < n {
		fetches := cl.PollFetches(ctx)
		if err := fetches.Err(); err != nil {
			t.Fatal(err)
		}
		for _, r := range fetches.Records() {
			got = append(got, string(r.Value))
		}
	}
	for i := range values {
		if got[i] != values[i] {
			t.Fatalf("record %d is %.10q..., want %.10q...", i, got[i], values[i])
		}
	}
}

// socketIO records the reads and writes a server makes on its sockets:
// how many bytes each read asked for and each write carried.
type socketIO struct {
	mu     sync.Mutex
	reads  []int
	writes []int
}

type recordingListener struct {
	net.Listener
	io *socketIO
}

func (l recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return recordingConn{Conn: c, io: l.io}, nil
}

type recordingConn struct {
	net.Conn
	io *socketIO
}

func (c recordingConn) Read(p []byte) (int, error) {
	c.io.mu.Lock()
	c.io.reads = append(c.io.reads, len(p))
	c.io.mu.Unlock()
	return c.Conn.Read(p)
}

func (c recordingConn) Write(p []byte) (int, error) {
	c.io.mu.Lock()
	c.io.writes = append(c.io.writes, len(p))
	c.io.mu.Unlock()
	return c.Conn.Write(p)
}

// TestTLSMovesRecordsInLargeSocketIO: over TLS the broker reads the
// socket in large pieces, not one TLS record (at most 16 KiB) at a time,
// and writes a fetch response's records several per write, not one system
// call (and on loopback one trip through the peer's TCP stack) per record.
// Before, the produce and fetch paths cost about twice the CPU per MB
// over TLS as without.
func TestTLSMovesRecordsInLargeSocketIO(t *testing.T) {
	const (
		maxRecord = 16<<10 + 256 // a TLS record's plaintext limit plus its overhead
		readAhead = 64 << 10     // what tlsconf.Socket asks the kernel for
	)
	ts := startServer(t)
	serverTLS, clientTLS := selfSignedTLS(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	io := &socketIO{}
	port := int32(ln.Addr().(*net.TCPAddr).Port)
	go ts.s.ServeListener(recordingListener{Listener: ln, io: io}, Listener{Protocol: SSL, AdvertisedHost: "127.0.0.1", AdvertisedPort: port, TLS: serverTLS})
	ts.createTopic(t, "bulk", 1, nil)

	const n = 256 // 4 MiB of 16 KiB records
	var values []string
	for i := range n {
		values = append(values, fmt.Sprintf("%04d-%016379d", i, i))
	}
	producer, err := kgo.NewClient(kgo.SeedBrokers(ln.Addr().String()), kgo.DialTLSConfig(clientTLS.Clone()),
		kgo.ProducerBatchCompression(kgo.NoCompression())) // the bytes sent are the records
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	produceSync(t, producer, "bulk", 0, values...)
	consumer, err := kgo.NewClient(kgo.SeedBrokers(ln.Addr().String()), kgo.DialTLSConfig(clientTLS.Clone()),
		kgo.ConsumeTopics("bulk"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	var got []string
	ctx := testCtx(t)
	for len(got) < n {
		fetches := consumer.PollFetches(ctx)
		if err := fetches.Err(); err != nil {
			t.Fatal(err)
		}
		for _, r := range fetches.Records() {
			got = append(got, string(r.Value))
		}
	}
	for i := range values {
		if got[i] != values[i] {
			t.Fatalf("record %d is %.10q..., want %.10q...", i, got[i], values[i])
		}
	}

	io.mu.Lock()
	defer io.mu.Unlock()
	for _, asked := range io.reads {
		if asked < readAhead {
			t.Fatalf("the broker read the socket %d bytes at a time, want at least %d", asked, readAhead)
		}
	}
	var total, inLarge int
	for _, size := range io.writes {
		total += size
		if size > maxRecord {
			inLarge += size
		}
	}
	if inLarge < total*9/10 {
		t.Fatalf("of %d bytes written, %d went in writes of more than one TLS record; want 90%%", total, inLarge)
	}
}
