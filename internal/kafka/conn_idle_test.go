package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func withMaxIdle(d time.Duration) serverOption {
	return withServer(func(s *Server) { s.cfg.ConnectionsMaxIdle = d })
}

// closedAfter waits for the server to close c and returns how long that
// took from start; it fails the test if c is still open after limit.
func closedAfter(t *testing.T, c net.Conn, start time.Time, limit time.Duration) time.Duration {
	t.Helper()
	c.SetReadDeadline(start.Add(limit))
	_, err := io.Copy(io.Discard, c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("connection still open %v after it went idle", limit)
	}
	return time.Since(start)
}

// A connection that sends half a request, or nothing, or nothing after its
// last response, is closed once ConnectionsMaxIdle passes, and not before.
func TestIdleConnectionsAreClosed(t *testing.T) {
	const maxIdle = 300 * time.Millisecond
	ts := startServer(t, withMaxIdle(maxIdle))
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("half")).AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), 1)

	silent := ts.dial(t)
	half := ts.dial(t)
	half.write(frame[:len(frame)/2])
	// A dribbling sender: bytes of one request keep arriving, but the
	// request never completes, so it counts as idle.
	dribbler := ts.dial(t)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		dribbler.nc.Write(binary.BigEndian.AppendUint32(nil, 1000))
		for range 20 {
			time.Sleep(maxIdle / 10)
			if _, err := dribbler.nc.Write([]byte{0}); err != nil {
				return
			}
		}
	}()
	answered := ts.dial(t)
	answered.roundTrip(kmsg.NewPtrApiVersionsRequest())
	start := time.Now()

	for name, c := range map[string]*rawConn{"silent": silent, "half a request": half, "dribbling": dribbler, "answered": answered} {
		took := closedAfter(t, c.nc, start, 10*maxIdle)
		t.Logf("%s connection closed after %v", name, took)
		if name == "answered" && took < maxIdle-50*time.Millisecond {
			t.Errorf("%s connection closed after %v, before ConnectionsMaxIdle (%v)", name, took, maxIdle)
		}
	}
	wg.Wait()
}

// A connection kept busy stays open past ConnectionsMaxIdle, however long
// it lives, and one whose requests keep it busy (a long poll) too.
func TestActiveRawConnectionStaysOpen(t *testing.T) {
	// Long enough that a loaded machine's scheduling delay between two
	// requests (up to three quarters of it) does not count as idleness.
	const maxIdle = 600 * time.Millisecond
	ts := startServer(t, withMaxIdle(maxIdle))
	ts.createTopic(t, "busy", 1, nil)
	c := ts.dial(t)
	deadline := time.Now().Add(5 * maxIdle)
	for time.Now().Before(deadline) {
		c.roundTrip(kmsg.NewPtrApiVersionsRequest())
		time.Sleep(maxIdle / 4)
	}
	// A fetch that waits longer than ConnectionsMaxIdle for data: the
	// request is being served, not idle.
	req := fetchRequest(12, "busy", 0, 0)
	req.MaxWaitMillis = int32(3 * maxIdle / time.Millisecond)
	c.roundTrip(req)
	c.roundTrip(kmsg.NewPtrApiVersionsRequest())
}

// closeTracker wraps the connections a kgo client dials and records which
// carried produce requests and which the server closed.
type closeTracker struct {
	mu    sync.Mutex
	conns []*trackedConn
}

type trackedConn struct {
	net.Conn
	produced     atomic.Bool
	closedByUs   atomic.Bool
	closedByPeer atomic.Bool
}

func (ct *closeTracker) dial(ctx context.Context, network, host string) (net.Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: nc}
	ct.mu.Lock()
	ct.conns = append(ct.conns, tc)
	ct.mu.Unlock()
	return tc, nil
}

// Write notes produce requests: kgo writes each request with one Write.
func (c *trackedConn) Write(p []byte) (int, error) {
	if len(p) >= 6 && int16(binary.BigEndian.Uint16(p[4:])) == int16(kmsg.Produce) {
		c.produced.Store(true)
	}
	return c.Conn.Write(p)
}

func (c *trackedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil && !c.closedByUs.Load() && (errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err)) {
		c.closedByPeer.Store(true)
	}
	return n, err
}

func (c *trackedConn) Close() error {
	c.closedByUs.Store(true)
	return c.Conn.Close()
}

func isReset(err error) bool {
	var ne *net.OpError
	return errors.As(err, &ne) && !ne.Timeout()
}

// A franz-go producer that keeps producing is never disconnected, though
// its run is many times ConnectionsMaxIdle; its other, unused connections
// may be.
func TestActiveKgoClientIsNotDisconnected(t *testing.T) {
	const maxIdle = 400 * time.Millisecond
	ts := startServer(t, withMaxIdle(maxIdle))
	ts.createTopic(t, "active", 1, nil)
	var tracker closeTracker
	cl := ts.client(t, kgo.Dialer(tracker.dial), kgo.DefaultProduceTopic("active"))
	deadline := time.Now().Add(5 * maxIdle)
	n := 0
	for time.Now().Before(deadline) {
		produceSync(t, cl, "active", 0, "v")
		n++
		time.Sleep(maxIdle / 8)
	}
	tracker.mu.Lock()
	defer tracker.mu.Unlock()
	producers := 0
	for _, c := range tracker.conns {
		if !c.produced.Load() {
			continue
		}
		producers++
		if c.closedByPeer.Load() {
			t.Errorf("the server closed a connection carrying produce requests (%s)", c.LocalAddr())
		}
	}
	if producers == 0 {
		t.Fatal("no connection carried a produce request")
	}
	t.Logf("%d produce requests on %d connection(s) over %v", n, producers, 5*maxIdle)
}

// A negative ConnectionsMaxIdle never closes a connection.
func TestIdleTimeoutDisabled(t *testing.T) {
	ts := startServer(t, withMaxIdle(-1))
	c := ts.dial(t)
	c.roundTrip(kmsg.NewPtrApiVersionsRequest())
	c.expectNothing(300 * time.Millisecond)
	c.roundTrip(kmsg.NewPtrApiVersionsRequest())
}
