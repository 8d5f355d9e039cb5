package nodetest

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

	"github.com/wharf-mq/wharf/internal/tlsconf"
)

// PKI is a throw-away certificate authority for TLS tests: a CA, a server
// certificate it signed for localhost and 127.0.0.1, and client
// certificates on demand, all as PEM files in a temp directory.
type PKI struct {
	t      testing.TB
	dir    string
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	serial int64

	// CAFile is the CA certificate, what clients trust (kcat's
	// ssl.ca.location, wharf's --tls-ca) and what --tls-client-ca names.
	CAFile string
	// CertFile and KeyFile are the server's certificate and key.
	CertFile, KeyFile string
}

// NewPKI makes a CA and a server certificate.
func NewPKI(t testing.TB) *PKI {
	t.Helper()
	p := &PKI{t: t, dir: t.TempDir()}
	p.caKey = newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "wharf test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &p.caKey.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	if p.ca, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	p.CAFile = p.writePEM("ca.pem", "CERTIFICATE", der)
	p.CertFile, p.KeyFile = p.issue("server", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "localhost"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	return p
}

// ServerFiles is the node's TLS configuration: the server certificate and,
// with clientCA, the CA as the one client certificates must come from.
func (p *PKI) ServerFiles(clientCA bool) tlsconf.Files {
	f := tlsconf.Files{Cert: p.CertFile, Key: p.KeyFile}
	if clientCA {
		f.ClientCA = p.CAFile
	}
	return f
}

// ClientConfig is a TLS client configuration that trusts the CA; with a
// non-empty cn it presents a client certificate of that common name.
func (p *PKI) ClientConfig(cn string) *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(p.ca)
	cfg := &tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12}
	if cn != "" {
		certFile, keyFile := p.ClientFiles(cn)
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			p.t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg
}

// ClientFiles issues a client certificate of common name cn and returns
// its certificate and key files.
func (p *PKI) ClientFiles(cn string) (certFile, keyFile string) {
	return p.issue("client-"+cn, &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn, Organization: []string{"wharf tests"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// issue signs tmpl with the CA and writes name.pem and name-key.pem.
func (p *PKI) issue(name string, tmpl *x509.Certificate) (certFile, keyFile string) {
	p.t.Helper()
	p.serial++
	tmpl.SerialNumber = big.NewInt(time.Now().UnixNano() + p.serial)
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	key := newKey(p.t)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		p.t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		p.t.Fatal(err)
	}
	return p.writePEM(name+".pem", "CERTIFICATE", der), p.writePEM(name+"-key.pem", "EC PRIVATE KEY", keyDER)
}

func (p *PKI) writePEM(name, typ string, der []byte) string {
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		p.t.Fatal(err)
	}
	return path
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}
