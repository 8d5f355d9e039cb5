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
