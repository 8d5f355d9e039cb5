// Package tlstest helps the tests of TLS servers: a self-signed
// certificate for 127.0.0.1 and a listener that records the writes the
// server makes on its sockets, which tells whether TLS records leave one
// system call each or several at a time.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"
)

// MaxRecord is the most one TLS record takes on the wire: 16 KiB of
// plaintext and its overhead.
const MaxRecord = 16<<10 + 256

// SelfSigned is a server configuration for 127.0.0.1 and a client one
// that trusts it.
func SelfSigned(t testing.TB) (server, client *tls.Config) {
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

// SocketIO records the size of every write made on the sockets accepted
// through its listener.
type SocketIO struct {
	mu     sync.Mutex
	writes []int
}

// Listen listens on a free loopback port; the sockets it accepts record
// their writes in the returned SocketIO. They are still TCP sockets
// (syscall.Conn) to whatever reads them.
func Listen(t testing.TB) (net.Listener, *SocketIO) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	io := &SocketIO{}
	return recordingListener{Listener: ln, io: io}, io
}

// Written is the bytes written in all, and those written by writes of
// more than one TLS record (MaxRecord).
func (s *SocketIO) Written() (total, inMultiRecordWrites int) {
	return s.WrittenInWritesOver(MaxRecord)
}

// WrittenInWritesOver is the bytes written in all, and those written by
// writes of more than size bytes.
func (s *SocketIO) WrittenInWritesOver(size int) (total, inLarger int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.writes {
		total += n
		if n > size {
			inLarger += n
		}
	}
	return total, inLarger
}

type recordingListener struct {
	net.Listener
	io *SocketIO
}

func (l recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return recordingConn{TCPConn: c.(*net.TCPConn), io: l.io}, nil
}

type recordingConn struct {
	*net.TCPConn
	io *SocketIO
}

func (c recordingConn) Write(p []byte) (int, error) {
	c.io.mu.Lock()
	c.io.writes = append(c.io.writes, len(p))
	c.io.mu.Unlock()
	return c.TCPConn.Write(p)
}
