package main

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// probeTimeout bounds one probe of an address: connecting and the answer.
const probeTimeout = 10 * time.Second

// peerKind is what answered a probe.
type peerKind int

const (
	peerKafka  peerKind = iota // a Kafka ApiVersions response
	peerAMQP                   // AMQP's protocol header, which an AMQP server sends back to anything else
	peerHTTP                   // an HTTP response (400 for the binary request)
	peerNATS                   // NATS's INFO line, which a NATS server sends to every new client
	peerClosed                 // closed the connection without a byte
	peerOther                  // something else
)

// probeCorrelationID is "\r\n\r\n": an HTTP server reads the probe as a
// malformed request line and answers 400 at once, where it would
// otherwise wait for the end of the line.
const probeCorrelationID = 0x0d0a0d0a

// probe sends a Kafka ApiVersions v0 request, which every Kafka broker
// answers, to addr (over TLS when tlsCfg is set) and classifies the first
// bytes that come back. The error is set when there is no answer: nothing
// listens, the TLS handshake fails, or the peer is silent until the
// deadline.
func probe(ctx context.Context, addr string, tlsCfg *tls.Config) (peerKind, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return peerOther, err
	}
	defer conn.Close()
	if tlsCfg != nil {
		if conn, err = handshakeTLS(ctx, conn, addr, tlsCfg); err != nil {
			return peerOther, err
		}
	}
	if deadline, ok := ctx.Deadline(); ok {
		conn.SetDeadline(deadline)
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()

	req := kmsg.NewRequestFormatter(kmsg.FormatterClientID("wharf")).
		AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), probeCorrelationID)
	if _, err := conn.Write(req); err != nil {
		return peerClosedOr(err)
	}
	var head [4]byte
	if n, err := io.ReadFull(conn, head[:]); err != nil {
		if n > 0 {
			return peerOther, nil
		}
		return peerClosedOr(err)
	}
	switch string(head[:]) {
	case "AMQP":
		return peerAMQP, nil
	case "HTTP":
		return peerHTTP, nil
	case "INFO":
		return peerNATS, nil
	}
	size := binary.BigEndian.Uint32(head[:])
	if size < 4 || size > 1<<20 {
		return peerOther, nil
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(conn, body); err != nil || binary.BigEndian.Uint32(body) != probeCorrelationID {
		return peerOther, nil
	}
	return peerKafka, nil
}

// peerClosedOr tells a peer that hung up (peerClosed) from one that did
// not answer in time (the error).
func peerClosedOr(err error) (peerKind, error) {
	if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return peerClosed, nil
	}
	return peerOther, err
}

// service is a listener of `wharf serve`, for messages that say where a
// client went wrong.
type service struct {
	name string   // as messages say it: "Kafka"
	kind peerKind // what it answers to a probe
	flag string   // the serve flag that sets its address
	port string   // its default port
}

var (
	kafkaService = service{"Kafka", peerKafka, "--kafka-addr", portOf(defaultKafkaAddr)}
	amqpService  = service{"AMQP", peerAMQP, "--amqp-addr", portOf(defaultAMQPAddr)}
	httpService  = service{"HTTP", peerHTTP, "--http-addr", portOf(defaultHTTPAddr)}
	natsService  = service{"NATS", peerNATS, "--nats-addr", portOf(defaultNATSAddr)}
)

func portOf(addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	return port
}

// checkPeer probes addr and returns nil if it is the service want, else a
// one-line error that says what is there instead, for example
// "127.0.0.1:5672 speaks AMQP, not Kafka; Wharf's Kafka port is 9092
// unless wharf serve --kafka-addr sets another".
func checkPeer(ctx context.Context, addr string, want service) error {
	return checkPeerWith(ctx, addr, want, nil)
}

// checkPeerWith is checkPeer over TLS when tlsCfg is set.
func checkPeerWith(ctx context.Context, addr string, want service, tlsCfg *tls.Config) error {
	kind, err := probe(ctx, addr, tlsCfg)
	if err != nil {
		return unreachable(addr, err)
	}
	if kind == want.kind {
		return nil
	}
	where := fmt.Sprintf("Wharf's %s port is %s unless wharf serve %s sets another", want.name, want.port, want.flag)
	for _, other := range []service{kafkaService, amqpService, httpService, natsService} {
		if kind == other.kind {
			return fmt.Errorf("%s speaks %s, not %s; %s", addr, other.name, want.name, where)
		}
	}
	if kind == peerClosed {
		return fmt.Errorf("%s closed the connection without answering: it does not speak %s; %s", addr, want.name, where)
	}
	return fmt.Errorf("%s does not answer as a %s server; %s", addr, want.name, where)
}

// errTLSHandshake is a peer that did not complete a TLS handshake.
var errTLSHandshake = errors.New("TLS handshake failed")

// handshakeTLS makes conn a TLS client connection to addr.
func handshakeTLS(ctx context.Context, conn net.Conn, addr string, cfg *tls.Config) (net.Conn, error) {
	cfg = cfg.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName, _, _ = net.SplitHostPort(addr)
	}
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, fmt.Errorf("%w: %w", errTLSHandshake, err)
	}
	return tc, nil
}

// unreachable says in one line why addr could not be probed.
func unreachable(addr string, err error) error {
	var timeout interface{ Timeout() bool }
	switch {
	case errors.Is(err, errTLSHandshake):
		return fmt.Errorf("%s: %v (is it an SSL or SASL_SSL listener, and does --tls-ca hold its CA?)", addr, err)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("nothing listens on %s (connection refused): is wharf serve running, and is this its address?", addr)
	case errors.As(err, &timeout) && timeout.Timeout(), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s did not answer in time", addr)
	}
	return fmt.Errorf("cannot reach %s: %w", addr, err)
}
