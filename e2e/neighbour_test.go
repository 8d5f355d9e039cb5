package e2e

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/node"
)

// closeWait is how long a test waits for the broker to drop a connection
// it must drop. Generous: a pass is usually immediate.
const closeWait = 5 * time.Second

// badRequest is one way a client can misbehave on the wire.
type badRequest struct {
	name string
	// bytes are written as-is after connecting.
	bytes []byte
	// closeWrite half-closes the connection after writing, so the broker
	// sees EOF in the middle of a request.
	closeWrite bool
}

// sizePrefixed frames body with a Kafka size prefix claiming size bytes.
func sizePrefixed(size int32, body []byte) []byte {
	out := binary.BigEndian.AppendUint32(nil, uint32(size))
	return append(out, body...)
}

// badRequests are malformed inputs the broker must answer by closing the
// connection, like Kafka does, without disturbing anyone else.
func badRequests() []badRequest {
	garbage := make([]byte, 60)
	for i := range garbage {
		garbage[i] = 0xff // API key 0xffff, version -1, ...
	}
	// A real Metadata v1 request whose body is cut short inside a frame
	// that claims exactly those bytes: the header parses, the body does not.
	metadata := kmsg.NewPtrMetadataRequest()
	metadata.Version = 1
	metadata.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("some-topic-name")}}
	full := kmsg.NewRequestFormatter(kmsg.FormatterClientID("e2e")).AppendRequest(nil, metadata, 1)
	cut := full[4 : len(full)-6]
	return []badRequest{
		{name: "absurd size 2GiB", bytes: sizePrefixed(0x7fffffff, []byte("0123456789"))},
		{name: "negative size", bytes: sizePrefixed(-1, []byte("0123456789"))},
		{name: "zero size", bytes: sizePrefixed(0, nil)},
		{name: "unknown api key garbage", bytes: sizePrefixed(int32(len(garbage)), garbage)},
		{name: "metadata body cut short", bytes: sizePrefixed(int32(len(cut)), cut)},
		{name: "truncated then EOF", bytes: sizePrefixed(100, []byte("0123456789")), closeWrite: true},
	}
}

// sendBad connects, writes the bad request and returns the connection.
func sendBad(t *testing.T, n *node.Node, bad badRequest) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", n.KafkaAddr())
	if err != nil {
		t.Fatalf("%s: dial: %v", bad.name, err)
	}
	conn := c.(*net.TCPConn)
	t.Cleanup(func() { conn.Close() })
	if _, err := conn.Write(bad.bytes); err != nil {
		t.Fatalf("%s: write: %v", bad.name, err)
	}
	if bad.closeWrite {
		if err := conn.CloseWrite(); err != nil {
			t.Fatalf("%s: half-close: %v", bad.name, err)
		}
	}
	return conn
}

// expectClosed waits for the broker to close conn, without sending any
// response first.
func expectClosed(conn net.Conn, what string) error {
	conn.SetReadDeadline(time.Now().Add(closeWait))
	buf := make([]byte, 64)
	n, err := conn.Read(buf)
	var netErr net.Error
	switch {
	case n > 0:
		return fmt.Errorf("%s: broker answered %d bytes (%x...) instead of closing the connection", what, n, buf[:n])
	case errors.As(err, &netErr) && netErr.Timeout():
		return fmt.Errorf("%s: broker kept the connection open for %v instead of closing it", what, closeWait)
	case err == nil:
		return fmt.Errorf("%s: read returned nothing and no error", what)
	}
	return nil // io.EOF or a reset: closed
}

// TestMalformedRequestsSpareNeighbours sends every kind of malformed
// request, first one by one and then all at once while a well-behaved
// franz-go client produces and consumes on its own connections. Each bad
// connection must be closed by the broker; the good client must not notice.
func TestMalformedRequestsSpareNeighbours(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	adm := newAdmin(t, n)
	topic := "neighbour"
	createTopic(t, adm, topic, 1, nil)
	producer := newFranz(t, n)
	consumer := newConsumer(t, n, topic)
	next := 0
	produceAndConsume := func(step string, count int) {
		t.Helper()
		var recs []*kgo.Record
		for i := range count {
			recs = append(recs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "v%d", next+i)})
		}
		res := producer.ProduceSync(testContext(t), recs...)
		if err := res.FirstErr(); err != nil {
			t.Fatalf("%s: good neighbour's produce failed: %v", step, err)
		}
		got := consumeN(t, consumer, count)
		for i, r := range got {
			if want := fmt.Sprintf("v%d", next+i); string(r.Value) != want || r.Offset != int64(next+i) {
				t.Fatalf("%s: good neighbour consumed %q at offset %d, want %q at %d", step, r.Value, r.Offset, want, next+i)
			}
		}
		next += count
	}
	produceAndConsume("before any bad request", 5)

	// A request left half-sent stays open for the whole test: a client
	// that stalls mid-request must not stall anyone else.
	stalled := sendBad(t, n, badRequest{name: "stalled mid-request", bytes: sizePrefixed(100, []byte("0123456789"))})
	produceAndConsume("with a stalled half-sent request open", 5)

	for _, bad := range badRequests() {
		conn := sendBad(t, n, bad)
		if err := expectClosed(conn, bad.name); err != nil {
			t.Error(err)
		}
		produceAndConsume("after "+bad.name, 5)
	}

	// Now all of them, ten times over, concurrently with the good client.
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for range 10 {
		for _, bad := range badRequests() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := net.Dial("tcp", n.KafkaAddr())
				if err != nil {
					errs <- fmt.Errorf("%s: dial: %w", bad.name, err)
					return
				}
				defer c.Close()
				if _, err := c.Write(bad.bytes); err != nil {
					return // the broker may already have closed on the size prefix
				}
				if bad.closeWrite {
					c.(*net.TCPConn).CloseWrite()
				}
				if err := expectClosed(c, bad.name+" (concurrent)"); err != nil {
					errs <- err
				}
			}()
		}
	}
	produceAndConsume("during a burst of bad connections", 50)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	produceAndConsume("after the burst", 5)

	// The stalled connection was never answered and is still open.
	stalled.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if n, err := stalled.Read(make([]byte, 8)); n > 0 || !isTimeout(err) {
		t.Errorf("stalled half-sent request: read %d bytes, err %v; want no answer and the connection still open", n, err)
	}
}

func isTimeout(err error) bool {
	var netErr net.Error
	return errors.As(err, &netErr) && netErr.Timeout()
}

// TestApiVersionsUnsupportedVersionFallback sends ApiVersions at a version
// no broker knows, as librdkafka and the Java client may: Kafka answers
// with a v0 response carrying UNSUPPORTED_VERSION and its supported ranges,
// keeps the connection, and the client retries at a version it can use.
func TestApiVersionsUnsupportedVersionFallback(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	conn, err := net.Dial("tcp", n.KafkaAddr())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(testTimeout))
	formatter := kmsg.NewRequestFormatter(kmsg.FormatterClientID("e2e"))

	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 127
	req.ClientSoftwareName = "e2e"
	req.ClientSoftwareVersion = "1"
	if _, err := conn.Write(formatter.AppendRequest(nil, req, 41)); err != nil {
		t.Fatalf("write ApiVersions v127: %v", err)
	}
	body := readResponse(t, conn, 41, "ApiVersions v127")
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("ApiVersions v127: answer does not parse as a v0 response (%d bytes %x): %v", len(body), body, err)
	}
	if resp.ErrorCode != 35 {
		t.Errorf("ApiVersions v127: error code %d, want 35 (UNSUPPORTED_VERSION)", resp.ErrorCode)
	}
	var apiVersionsMax int16 = -1
	for _, k := range resp.ApiKeys {
		if k.ApiKey == 18 {
			apiVersionsMax = k.MaxVersion
		}
	}
	if apiVersionsMax < 3 {
		t.Errorf("ApiVersions v127: fallback lists ApiVersions up to v%d among %d keys, want the real ranges (v3 or later)", apiVersionsMax, len(resp.ApiKeys))
	}

	// The connection stays usable at a supported version.
	req.Version = apiVersionsMax
	if _, err := conn.Write(formatter.AppendRequest(nil, req, 42)); err != nil {
		t.Fatalf("write ApiVersions v%d after the fallback: %v", apiVersionsMax, err)
	}
	body = readResponse(t, conn, 42, fmt.Sprintf("ApiVersions v%d after the fallback", apiVersionsMax))
	resp = kmsg.NewPtrApiVersionsResponse()
	resp.Version = apiVersionsMax
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("ApiVersions v%d: %v", apiVersionsMax, err)
	}
	if resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
		t.Errorf("ApiVersions v%d after the fallback: error %d, %d keys; want 0 and the key list", apiVersionsMax, resp.ErrorCode, len(resp.ApiKeys))
	}
}

// readResponse reads one response frame and returns its body after the v0
// response header (the correlation id, which must match). ApiVersions
// responses always use header v0, whatever the request version.
func readResponse(t *testing.T, conn net.Conn, correlationID int32, what string) []byte {
	t.Helper()
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		t.Fatalf("%s: reading the response size: %v (the broker closed or never answered)", what, err)
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if len(frame) < 4 {
		t.Fatalf("%s: response frame of %d bytes is too short for a header", what, len(frame))
	}
	if _, err := io.ReadFull(conn, frame); err != nil {
		t.Fatalf("%s: reading a %d-byte response: %v", what, len(frame), err)
	}
	if got := int32(binary.BigEndian.Uint32(frame)); got != correlationID {
		t.Fatalf("%s: response correlation id %d, want %d", what, got, correlationID)
	}
	return frame[4:]
}

// TestShutdownWithStalledConnections closes the node while one client is
// half-way through sending a request, one has connected and said nothing,
// and a franz-go client holds idle connections: Close must return promptly
// and without error, and drop every one of those connections.
func TestShutdownWithStalledConnections(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	adm := newAdmin(t, n)
	createTopic(t, adm, "before-shutdown", 1, nil) // the admin's connections are now open and idle

	halfSent := sendBad(t, n, badRequest{name: "half-sent", bytes: sizePrefixed(100, []byte("0123456789"))})
	silent, err := net.Dial("tcp", n.KafkaAddr())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer silent.Close()

	ctx := testContext(t)
	start := time.Now()
	if err := n.Close(ctx); err != nil {
		t.Errorf("Close with stalled connections open: %v (after %v)", err, time.Since(start))
	}
	if took := time.Since(start); took > closeWait {
		t.Errorf("Close with stalled connections took %v, want it to drop them promptly", took)
	}
	for name, c := range map[string]net.Conn{"half-sent request": halfSent, "silent connection": silent} {
		if err := expectClosed(c, name+" at shutdown"); err != nil {
			t.Error(err)
		}
	}
}
