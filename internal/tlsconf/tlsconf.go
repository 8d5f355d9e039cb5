// Package tlsconf loads the server certificate every TLS listener of a node
// shares (Kafka SSL and SASL_SSL, AMQPS, HTTPS) and reloads it on demand,
// so that a renewed certificate takes effect on SIGHUP without a restart:
// each new handshake reads the current files' contents, while connections
// already established keep the session they negotiated. Socket, the
// connection under a server's tls.Conn, makes TLS cost few system calls
// per byte: it reads ahead and writes a response's records in batches.
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
)

// Files names what `wharf serve` was given: --tls-cert, --tls-key and,
// optionally, --tls-client-ca.
type Files struct {
	Cert string // PEM certificate chain, leaf first
	Key  string // PEM private key of the leaf
	// ClientCA is a PEM bundle of the CAs that sign client certificates.
	// When set, every TLS client must present a certificate one of them
	// signed (AMQP's EXTERNAL mechanism authenticates with it).
	ClientCA string
}

// Reloader holds the current server TLS configuration.
type Reloader struct {
	files   Files
	current atomic.Pointer[tls.Config]
}

// Load reads files once; it fails if they do not make a usable
// configuration.
func Load(files Files) (*Reloader, error) {
	if files.Cert == "" || files.Key == "" {
		return nil, errors.New("tls: a certificate needs both --tls-cert and --tls-key")
	}
	r := &Reloader{files: files}
	if err := r.Reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// Reload reads the files again. On error the previous configuration stays
// in force, so a half-written renewal cannot take the listeners down.
func (r *Reloader) Reload() error {
	cfg, err := build(r.files)
	if err != nil {
		return err
	}
	r.current.Store(cfg)
	return nil
}

// ServerConfig is the configuration to give tls.NewListener: every
// handshake takes the configuration current at that moment.
func (r *Reloader) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return r.current.Load(), nil
		},
	}
}

func build(f Files) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("tls: load %s and %s: %w", f.Cert, f.Key, err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if f.ClientCA != "" {
		pem, err := os.ReadFile(f.ClientCA)
		if err != nil {
			return nil, fmt.Errorf("tls: read client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls: %s holds no PEM certificate", f.ClientCA)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}
