package tlsconf

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// writeCert writes a self-signed certificate for 127.0.0.1 named cn, and
// its key, into dir; it returns the certificate for clients to trust.
func writeCert(t testing.TB, dir, cn string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("cert.pem", "CERTIFICATE", der)
	write("key.pem", "EC PRIVATE KEY", keyDER)
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// serveEcho accepts TLS connections and echoes what they send.
func serveEcho(t *testing.T, r *Reloader) net.Addr {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", r.ServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 64)
				for {
					n, err := c.Read(buf)
					if err != nil {
						return
					}
					c.Write(buf[:n])
				}
			}()
		}
	}()
	return ln.Addr()
}

func dialTrusting(t *testing.T, addr net.Addr, ca *x509.Certificate) (*tls.Conn, error) {
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return tls.Dial("tcp", addr.String(), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
}

func echo(t *testing.T, c *tls.Conn) {
	t.Helper()
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := c.Read(buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo: %q, %v", buf, err)
	}
}

// TestReloadServesTheNewCertificateAndKeepsConnections: after Reload new
// handshakes present the new certificate, a connection made before keeps
// working, and a broken file leaves the old certificate in force.
func TestReloadServesTheNewCertificateAndKeepsConnections(t *testing.T) {
	dir := t.TempDir()
	first := writeCert(t, dir, "first")
	r, err := Load(Files{Cert: filepath.Join(dir, "cert.pem"), Key: filepath.Join(dir, "key.pem")})
	if err != nil {
		t.Fatal(err)
	}
	addr := serveEcho(t, r)
	old, err := dialTrusting(t, addr, first)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	echo(t, old)

	second := writeCert(t, dir, "second")
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, err := dialTrusting(t, addr, first); err == nil {
		t.Fatal("a new handshake still presents the old certificate after Reload")
	}
	renewed, err := dialTrusting(t, addr, second)
	if err != nil {
		t.Fatalf("a new handshake after Reload: %v", err)
	}
	renewed.Close()
	echo(t, old)

	if err := os.WriteFile(filepath.Join(dir, "cert.pem"), []byte("half-written"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.Reload(); err == nil {
		t.Fatal("Reload accepted a broken certificate file")
	}
	kept, err := dialTrusting(t, addr, second)
	if err != nil {
		t.Fatalf("a failed Reload took the working certificate away: %v", err)
	}
	kept.Close()
}

func TestClientCARequiresAClientCertificate(t *testing.T) {
	dir := t.TempDir()
	server := writeCert(t, dir, "server")
	caDir := t.TempDir()
	writeCert(t, caDir, "client") // self-signed: the client CA bundle is the client's own certificate
	r, err := Load(Files{Cert: filepath.Join(dir, "cert.pem"), Key: filepath.Join(dir, "key.pem"), ClientCA: filepath.Join(caDir, "cert.pem")})
	if err != nil {
		t.Fatal(err)
	}
	addr := serveEcho(t, r)
	anonymous, err := dialTrusting(t, addr, server)
	if err == nil {
		// TLS 1.3 reports the refusal on the first read, not in Dial.
		_, err = anonymous.Read(make([]byte, 1))
		anonymous.Close()
	}
	if err == nil {
		t.Fatal("a client without a certificate got through")
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(caDir, "cert.pem"), filepath.Join(caDir, "key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(server)
	c, err := tls.Dial("tcp", addr.String(), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", Certificates: []tls.Certificate{pair}})
	if err != nil {
		t.Fatalf("a client with a certificate the CA signed: %v", err)
	}
	defer c.Close()
	echo(t, c)
}

func TestLoadNeedsCertAndKey(t *testing.T) {
	if _, err := Load(Files{Cert: "only-cert.pem"}); err == nil {
		t.Fatal("Load without a key succeeded")
	}
}
