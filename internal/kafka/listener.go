package kafka

import (
	"crypto/tls"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
)

// SecurityProtocol is a Kafka listener's security.protocol.
type SecurityProtocol string

// The security protocols, named as Kafka names them.
const (
	Plaintext     SecurityProtocol = "PLAINTEXT"
	SSL           SecurityProtocol = "SSL"
	SASLPlaintext SecurityProtocol = "SASL_PLAINTEXT"
	SASLSSL       SecurityProtocol = "SASL_SSL"
)

// SecurityProtocols lists the protocols a listener may have.
var SecurityProtocols = []SecurityProtocol{Plaintext, SSL, SASLPlaintext, SASLSSL}

// TLS reports whether connections are TLS.
func (p SecurityProtocol) TLS() bool { return p == SSL || p == SASLSSL }

// SASL reports whether clients must authenticate with SASL before any
// request but ApiVersions and the SASL requests.
func (p SecurityProtocol) SASL() bool { return p == SASLPlaintext || p == SASLSSL }

// Listener is one endpoint of the server, an entry of Kafka's
// `listeners`: its name is its security protocol (Kafka's default
// listener.security.protocol.map). A client connected to a listener is
// given that listener's advertised address in Metadata, DescribeCluster
// and FindCoordinator, so that it stays on the listener it chose, as with
// Kafka's listener names.
type Listener struct {
	Protocol       SecurityProtocol
	AdvertisedHost string
	AdvertisedPort int32
	// TLS is the server configuration of a TLS listener (SSL, SASL_SSL);
	// nil for the others.
	TLS *tls.Config
}

// Name is the listener's name, as advertised.listeners shows it.
func (l *Listener) Name() string { return string(l.Protocol) }

// advertised is the listener's entry in advertised.listeners.
func (l *Listener) advertised() string {
	return l.Name() + "://" + net.JoinHostPort(l.AdvertisedHost, strconv.Itoa(int(l.AdvertisedPort)))
}

// ServeListener is Serve for one of several listeners: connections
// accepted on ln follow l's security protocol and are advertised l's
// address. Serve takes ownership of ln and closes it.
func (s *Server) ServeListener(ln net.Listener, l Listener) error {
	serve, err := s.AddListener(ln, l)
	if err != nil {
		return err
	}
	return serve()
}

// AddListener adds l to the listeners advertised, in the order of the
// calls (Kafka's advertised.listeners keeps the configured order), and
// returns what serves it: a node adds every listener before it serves any
// in its own goroutine. On an error it closes ln.
func (s *Server) AddListener(ln net.Listener, l Listener) (serve func() error, err error) {
	if l.Protocol.TLS() != (l.TLS != nil) {
		ln.Close()
		return nil, fmt.Errorf("kafka: listener %s: a TLS configuration goes with SSL and SASL_SSL only", l.Name())
	}
	s.listenersMu.Lock()
	s.listeners = append(s.listeners, &l)
	s.listenersMu.Unlock()
	return func() error { return s.netsrv.ServeWith(ln, func(nc net.Conn) *conn { return newConn(s, nc, &l) }) }, nil
}

// defaultListener is the PLAINTEXT listener Serve serves, at
// Config.AdvertisedHost and AdvertisedPort.
func (s *Server) defaultListener() Listener {
	return Listener{Protocol: Plaintext, AdvertisedHost: s.cfg.AdvertisedHost, AdvertisedPort: s.cfg.AdvertisedPort}
}

// advertisedListeners is the broker's advertised.listeners: every
// listener served, in the order they were added.
func (s *Server) advertisedListeners() string {
	s.listenersMu.Lock()
	defer s.listenersMu.Unlock()
	names := make([]string, 0, len(s.listeners))
	for _, l := range s.listeners {
		names = append(names, l.advertised())
	}
	return strings.Join(slices.Compact(names), ",")
}
