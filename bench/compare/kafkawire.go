package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A franz-go kgo.Client per connection would put 5,000 clients, each with
// its own goroutines and buffers, in the benchmark process. The idle
// workload instead holds bare TCP connections that each do what a client
// does first: ApiVersions, then Metadata, every request and response
// encoded and decoded by kmsg.

// kafkaWireConn is one TCP connection to a Kafka listener.
type kafkaWireConn struct {
	conn   net.Conn
	format *kmsg.RequestFormatter
	corrID int32
}

// apiVersionsVersion is the ApiVersions version sent: v3, the first
// flexible one, which every broker since Kafka 2.4 answers.
const apiVersionsVersion = 3

// dialKafkaHandshake connects to addr and sends ApiVersions and Metadata
// (all topics, at the highest version both kmsg and the broker know),
// reading each response.
func dialKafkaHandshake(ctx context.Context, addr string) (*kafkaWireConn, error) {
	d := net.Dialer{Timeout: 30 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	k := &kafkaWireConn{conn: conn, format: kmsg.NewRequestFormatter(kmsg.FormatterClientID("wharf-bench-idle"))}
	if err := k.handshake(); err != nil {
		conn.Close()
		return nil, err
	}
	return k, nil
}

func (k *kafkaWireConn) handshake() error {
	if err := k.conn.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		return err
	}
	versions := kmsg.NewPtrApiVersionsRequest()
	versions.Version = apiVersionsVersion
	versions.ClientSoftwareName = "wharf-bench"
	versions.ClientSoftwareVersion = "1"
	vresp := versions.ResponseKind().(*kmsg.ApiVersionsResponse)
	if err := k.roundTrip(versions, vresp); err != nil {
		return fmt.Errorf("ApiVersions: %w", err)
	}
	if err := kerr.ErrorForCode(vresp.ErrorCode); err != nil {
		return fmt.Errorf("ApiVersions: %w", err)
	}
	meta := kmsg.NewPtrMetadataRequest()
	brokerMax := int16(-1)
	for _, api := range vresp.ApiKeys {
		if api.ApiKey == meta.Key() {
			brokerMax = api.MaxVersion
		}
	}
	if brokerMax < 0 {
		return errors.New("broker does not list Metadata in ApiVersions")
	}
	meta.Version = min(brokerMax, meta.MaxVersion())
	meta.Topics = nil // all topics
	if err := k.roundTrip(meta, meta.ResponseKind()); err != nil {
		return fmt.Errorf("Metadata v%d: %w", meta.Version, err)
	}
	return k.conn.SetDeadline(time.Time{})
}

// roundTrip writes req and reads its response into resp.
func (k *kafkaWireConn) roundTrip(req kmsg.Request, resp kmsg.Response) error {
	k.corrID++
	if _, err := k.conn.Write(k.format.AppendRequest(nil, req, k.corrID)); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(k.conn, size[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 64<<20 {
		return fmt.Errorf("response size %d", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(k.conn, body); err != nil {
		return err
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != k.corrID {
		return fmt.Errorf("correlation id %d, want %d", got, k.corrID)
	}
	body = body[4:]
	// A flexible response's header ends with tagged fields, except
	// ApiVersions': its header stays v0 so that a client not yet knowing
	// the broker's versions can read it.
	if resp.IsFlexible() && req.Key() != kmsg.ApiVersions.Int16() {
		var err error
		if body, err = skipTaggedFields(body); err != nil {
			return err
		}
	}
	return resp.ReadFrom(body)
}

// skipTaggedFields drops a tagged-field section (a count, then for each a
// tag, a length and that many bytes) from the front of b.
func skipTaggedFields(b []byte) ([]byte, error) {
	count, n := binary.Uvarint(b)
	if n <= 0 {
		return nil, errors.New("bad tagged-field count in response header")
	}
	b = b[n:]
	for range count {
		if _, n = binary.Uvarint(b); n <= 0 {
			return nil, errors.New("bad tag in response header")
		}
		b = b[n:]
		size, n := binary.Uvarint(b)
		if n <= 0 || uint64(len(b)-n) < size {
			return nil, errors.New("bad tagged field in response header")
		}
		b = b[n+int(size):]
	}
	return b, nil
}

// alive reports whether the server still holds the connection open: a
// read finds neither data nor end of file within a millisecond.
func (k *kafkaWireConn) alive() bool {
	if err := k.conn.SetReadDeadline(time.Now().Add(time.Millisecond)); err != nil {
		return false
	}
	var b [1]byte
	_, err := k.conn.Read(b[:])
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (k *kafkaWireConn) close() { k.conn.Close() }
