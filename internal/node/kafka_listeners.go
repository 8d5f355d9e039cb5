package node

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/wharf-mq/wharf/internal/kafka"
	"github.com/wharf-mq/wharf/internal/tlsconf"
)

// KafkaListener is one entry of --kafka-listeners: a security protocol
// and the address to bind.
type KafkaListener struct {
	Protocol kafka.SecurityProtocol
	Addr     string // host:port; an empty host binds every interface
}

// String is the entry as Kafka's listeners syntax writes it.
func (l KafkaListener) String() string { return string(l.Protocol) + "://" + l.Addr }

// ParseKafkaListeners reads Kafka's `listeners` syntax:
// "PLAINTEXT://127.0.0.1:9092,SASL_SSL://:9095". A listener's name is its
// security protocol (Kafka's default listener.security.protocol.map), so
// each protocol appears once; each listener needs a port of its own, as
// in Kafka.
func ParseKafkaListeners(s string) ([]KafkaListener, error) {
	var out []KafkaListener
	for entry := range strings.SplitSeq(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		name, addr, ok := strings.Cut(entry, "://")
		if !ok {
			return nil, fmt.Errorf("listener %q: want NAME://HOST:PORT", entry)
		}
		proto := kafka.SecurityProtocol(strings.ToUpper(name))
		if !slices.Contains(kafka.SecurityProtocols, proto) {
			return nil, fmt.Errorf("listener %q: unknown name %s (want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)", entry, name)
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("listener %q: %v", entry, err)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			return nil, fmt.Errorf("listener %q: port %q is not a number from 0 to 65535", entry, port)
		}
		for _, prev := range out {
			if prev.Protocol == proto {
				return nil, fmt.Errorf("listener %s appears twice", proto)
			}
			if _, prevPort, _ := net.SplitHostPort(prev.Addr); prevPort == port && port != "0" {
				return nil, fmt.Errorf("listeners %s and %s share port %s; each listener needs its own", prev, entry, port)
			}
		}
		out = append(out, KafkaListener{Protocol: proto, Addr: net.JoinHostPort(host, port)})
	}
	if len(out) == 0 {
		return nil, errors.New("no listener given")
	}
	return out, nil
}

// kafkaListenerSpecs are the listeners cfg asks for: KafkaListeners, or
// one PLAINTEXT listener on KafkaAddr.
func kafkaListenerSpecs(cfg Config) []KafkaListener {
	if len(cfg.KafkaListeners) > 0 {
		return cfg.KafkaListeners
	}
	return []KafkaListener{{Protocol: kafka.Plaintext, Addr: cfg.KafkaAddr}}
}

// boundKafkaListener is a bound socket and what the Kafka server needs to
// serve it.
type boundKafkaListener struct {
	ln   net.Listener
	spec kafka.Listener
}

type boundKafkaListeners []boundKafkaListener

// listenKafka binds every Kafka listener of cfg; on error it closes those
// it bound.
func listenKafka(cfg Config, certs *tlsconf.Reloader) (boundKafkaListeners, error) {
	var bound boundKafkaListeners
	for _, spec := range kafkaListenerSpecs(cfg) {
		l := kafka.Listener{Protocol: spec.Protocol}
		if spec.Protocol.TLS() {
			if certs == nil {
				bound.close()
				return nil, fmt.Errorf("node: Kafka listener %s needs a certificate: give --tls-cert and --tls-key", spec)
			}
			l.TLS = certs.ServerConfig()
		}
		ln, err := net.Listen("tcp", spec.Addr)
		if err != nil {
			bound.close()
			return nil, fmt.Errorf("node: listen for Kafka %s on %q: %w", spec.Protocol, spec.Addr, err)
		}
		l.AdvertisedHost = AdvertisedHost(cfg.AdvertisedHost, spec.Addr)
		l.AdvertisedPort = int32(ln.Addr().(*net.TCPAddr).Port)
		bound = append(bound, boundKafkaListener{ln: ln, spec: l})
	}
	return bound, nil
}

func (b boundKafkaListeners) close() {
	for _, l := range b {
		l.ln.Close()
	}
}

// advertised is the listener's host:port, as its clients are told.
func (b boundKafkaListener) advertised() string {
	return net.JoinHostPort(b.spec.AdvertisedHost, strconv.Itoa(int(b.spec.AdvertisedPort)))
}

// serveKafka serves every Kafka listener on the node's Kafka server (all
// added before any is served, so advertised.listeners keeps their order),
// and warns about each that lets clients in without authentication on an
// address other machines can reach.
func (n *Node) serveKafka(clientCA bool) {
	for _, l := range n.kafkaListeners {
		serve, err := n.kafkaServer.AddListener(n.limited("kafka", l.ln), l.spec)
		if err != nil {
			n.fail(err)
			return
		}
		n.serve("kafka", serve)
		n.logger.Info("kafka listener started", "listener", l.spec.Name(), "addr", l.ln.Addr().String(), "advertised", l.advertised())
		authenticated := l.spec.Protocol.SASL() || (l.spec.Protocol == kafka.SSL && clientCA)
		if !authenticated && !boundToLoopback(l.ln) {
			n.logger.Warn("kafka listener accepts clients without authentication from other machines; "+
				"secure it with --kafka-listeners SASL_SSL://HOST:PORT (with --tls-cert and --tls-key) or SASL_PLAINTEXT://, "+
				"or SSL:// with --tls-client-ca, or bind it to 127.0.0.1",
				"listener", l.spec.Name(), "addr", l.ln.Addr().String())
		}
	}
}

// boundToLoopback reports whether ln only accepts local connections.
func boundToLoopback(ln net.Listener) bool {
	tcp, ok := ln.Addr().(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// KafkaListenerAddr is the address the Kafka listener with protocol p is
// bound to, or "" when the node has none.
func (n *Node) KafkaListenerAddr(p kafka.SecurityProtocol) string {
	for _, e := range n.KafkaEndpoints() {
		if e.Protocol == p {
			return e.Addr
		}
	}
	return ""
}

// KafkaEndpoint describes one bound Kafka listener.
type KafkaEndpoint struct {
	Protocol   kafka.SecurityProtocol
	Addr       string // bound, e.g. "127.0.0.1:41234"
	Advertised string // host:port clients of this listener are told
}

// KafkaEndpoints lists the Kafka listeners in the order configured.
func (n *Node) KafkaEndpoints() []KafkaEndpoint {
	out := make([]KafkaEndpoint, 0, len(n.kafkaListeners))
	for _, l := range n.kafkaListeners {
		out = append(out, KafkaEndpoint{Protocol: l.spec.Protocol, Addr: l.ln.Addr().String(), Advertised: l.advertised()})
	}
	return out
}
