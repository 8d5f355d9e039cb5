package amqp

import (
	"bytes"
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

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/wharf-mq/wharf/internal/tlsconf"
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
		&tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
}

// writeSizes records the size of every write the server makes on its
// sockets.
type writeSizes struct {
	mu    sync.Mutex
	sizes []int
}

type recordingListener struct {
	net.Listener
	w *writeSizes
}

func (l recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return recordingConn{Conn: c, w: l.w}, nil
}

type recordingConn struct {
	net.Conn
	w *writeSizes
}

func (c recordingConn) Write(p []byte) (int, error) {
	c.w.mu.Lock()
	c.w.sizes = append(c.w.sizes, len(p))
	c.w.mu.Unlock()
	return c.Conn.Write(p)
}

// TestAMQPSWritesDeliveriesInLargeSocketWrites: over TLS a flush of the
// connection's 64 KiB write buffer is several TLS records, which leave
// in one or two socket writes rather than a system call each.
func TestAMQPSWritesDeliveriesInLargeSocketWrites(t *testing.T) {
	const maxRecord = 16<<10 + 256 // a TLS record's plaintext limit plus its overhead
	b := startBroker(t)
	serverTLS, clientTLS := selfSignedTLS(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	writes := &writeSizes{}
	served := make(chan error, 1)
	go func() {
		served <- b.srv.Serve(tlsconf.NewListener(recordingListener{Listener: ln, w: writes}, serverTLS))
	}()
	t.Cleanup(func() {
		b.stop()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})

	conn, err := amqp091.DialTLS("amqps://guest:guest@"+ln.Addr().String()+"/", clientTLS)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch := openChannel(t, conn)
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	const n = 256 // 4 MiB of 16 KiB messages
	bodies := make([][]byte, n)
	for i := range bodies {
		bodies[i] = []byte(fmt.Sprintf("%04d-%016379d", i, i))
		if err := ch.Publish("", q.Name, false, false, amqp091.Publishing{Body: bodies[i]}); err != nil {
			t.Fatal(err)
		}
	}
	deliveries, err := ch.Consume(q.Name, "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		select {
		case d := <-deliveries:
			if !bytes.Equal(d.Body, bodies[i]) {
				t.Fatalf("delivery %d is %.10q..., want %.10q...", i, d.Body, bodies[i])
			}
		case <-time.After(testTimeout):
			t.Fatalf("only %d of %d deliveries arrived", i, n)
		}
	}

	writes.mu.Lock()
	defer writes.mu.Unlock()
	var total, inLarge int
	for _, size := range writes.sizes {
		total += size
		if size > maxRecord {
			inLarge += size
		}
	}
	if inLarge < total*9/10 {
		t.Fatalf("of %d bytes written, %d went in writes of more than one TLS record; want 90%%", total, inLarge)
	}
}
