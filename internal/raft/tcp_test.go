package raft

import (
	"bufio"
	"context"
	"encoding/binary"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// collector is a Handler that keeps what it is given.
type collector struct {
	mu     sync.Mutex
	from   []uint64
	envs   []Envelope
	opened []uint64 // the peers of the connections opened, in order
	broken []brokenAt
}

// brokenAt is a connection's break as a Handler heard of it: the peer,
// and how many envelopes had arrived by then.
type brokenAt struct {
	from  uint64
	after int
}

func (c *collector) Deliver(from uint64, envs []Envelope) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for range envs {
		c.from = append(c.from, from)
	}
	c.envs = append(c.envs, envs...)
}

func (c *collector) Connected(from uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.opened = append(c.opened, from)
}

func (c *collector) Disconnected(from uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.broken = append(c.broken, brokenAt{from: from, after: len(c.envs)})
}

func (c *collector) breaks() []brokenAt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]brokenAt(nil), c.broken...)
}

func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.envs)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func listen(t *testing.T, id uint64, addr string, peers map[uint64]string) *TCPTransport {
	t.Helper()
	tr, err := ListenTCP(TCPConfig{NodeID: id, ListenAddr: addr, Peers: peers, QueueBytes: 1 << 20, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// startPair starts the transports of nodes 1 and 2 on loopback, 1 dialing
// 2, and the collectors they hand what arrives to.
func startPair(t *testing.T) (a, b *TCPTransport, ra, rb *collector) {
	a = listen(t, 1, "127.0.0.1:0", nil)
	b = listen(t, 2, "127.0.0.1:0", nil)
	a.SetPeer(2, b.Addr().String())
	ra, rb = &collector{}, &collector{}
	a.Start(ra)
	b.Start(rb)
	return a, b, ra, rb
}

// TestTCPTransport: both nodes of a pair send on the one connection the
// lower id dials, in order; the dialer reconnects after the other side
// restarts on its address.
func TestTCPTransport(t *testing.T) {
	a, b, ra, rb := startPair(t)

	for i := range 100 {
		a.Send(2, []Envelope{{Kind: KindQuiesce, Group: uint64(i), Term: 1}})
	}
	waitFor(t, "a's envelopes at b", func() bool { return rb.count() == 100 })
	for i, e := range rb.envs {
		if e.Group != uint64(i) || rb.from[i] != 1 {
			t.Fatalf("envelope %d at b: group %d from %d", i, e.Group, rb.from[i])
		}
	}
	b.Send(1, []Envelope{{Kind: KindPing}}) // b learned of 1 from its connection
	waitFor(t, "b's ping at a", func() bool { return ra.count() == 1 })

	addr := b.Addr().String()
	b.Close()
	b2 := listen(t, 2, addr, nil)
	var rb2 collector
	b2.Start(&rb2)
	waitFor(t, "a to reconnect", func() bool {
		a.Send(2, []Envelope{{Kind: KindPing}})
		return rb2.count() > 0
	})
}

// TestTCPTransportReportsBrokenConnections: both sides hear of the
// connection that opens; when a peer's process goes (its transport
// closes, as a killed process's sockets do), the other side hears of the
// broken connection at once, after every envelope that arrived on it, so
// the host fails or resends what waits on an answer over it; a transport
// that closes itself reports nothing.
func TestTCPTransportReportsBrokenConnections(t *testing.T) {
	a, b, ra, rb := startPair(t)
	a.Send(2, []Envelope{{Kind: KindPing}})
	waitFor(t, "a's ping at b", func() bool { return rb.count() == 1 })
	for i := range 50 {
		b.Send(1, []Envelope{{Kind: KindQuiesce, Group: uint64(i), Term: 1}})
	}
	waitFor(t, "b's envelopes at a", func() bool { return ra.count() == 50 })
	ra.mu.Lock()
	opened := slices.Clone(ra.opened)
	ra.mu.Unlock()
	if !slices.Equal(opened, []uint64{2}) {
		t.Fatalf("a heard of connections to %v, want one to node 2", opened)
	}
	b.Close()
	waitFor(t, "a to hear that its connection to b broke", func() bool { return len(ra.breaks()) > 0 })
	if got := ra.breaks(); got[0] != (brokenAt{from: 2, after: 50}) {
		t.Fatalf("a heard of breaks %+v, want node 2's after the 50 envelopes it sent", got)
	}
	if got := rb.breaks(); len(got) > 0 {
		t.Fatalf("b, which closed, heard of breaks %+v", got)
	}
}

// TestTCPTransportQueueBounds: Send drops what does not fit in a peer's
// queue while it is unreachable; Stream waits for room and a connection
// instead, until its context ends.
func TestTCPTransportQueueBounds(t *testing.T) {
	a := listen(t, 1, "127.0.0.1:0", map[uint64]string{2: "127.0.0.1:1"}) // nobody listens there
	a.Start(&collector{})
	big := make([]byte, 256<<10)
	for range 8 {
		a.Send(2, []Envelope{{Kind: KindSnapshotChunk, Group: 1, Data: big}})
	}
	if a.Dropped() < 4 {
		t.Fatalf("%d envelopes dropped of 8 of 256 KiB with a queue of 1 MiB", a.Dropped())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := a.Stream(ctx, 2, []Envelope{{Kind: KindSnapshotChunk, Group: 1, Data: big}}); err != context.DeadlineExceeded {
		t.Fatalf("Stream to an unreachable peer: %v, want the context's deadline", err)
	}
}

// TestTCPTransportDropsExpiredRequests: a forward queued while there is
// no connection, and expired by the time one opens, is not written: its
// caller gave up, and the leader may have forgotten an earlier copy it
// took. A call queued with it that has time left goes, and expires on the
// receiver's clock about as much later as it had left.
func TestTCPTransportDropsExpiredRequests(t *testing.T) {
	a := listen(t, 1, "127.0.0.1:0", map[uint64]string{2: "127.0.0.1:1"}) // nobody listens there
	a.Start(&collector{})
	sent := time.Now()
	soon, later := sent.Add(20*time.Millisecond), sent.Add(10*time.Second)
	a.Send(2, []Envelope{
		{Kind: KindForward, Group: 1, Index: 1, Data: []byte("late"), Expires: soon},
		{Kind: KindCall, Group: 1, Index: 2, Data: []byte("on time"), Expires: later},
	})
	waitFor(t, "the forward to expire in the queue", func() bool { return time.Now().After(soon) })

	b := listen(t, 2, "127.0.0.1:0", nil)
	var rb collector
	b.Start(&rb)
	a.SetPeer(2, b.Addr().String())
	waitFor(t, "the call at node 2", func() bool { return rb.count() > 0 })
	a.Send(2, []Envelope{{Kind: KindPing}}) // behind anything still on its way
	waitFor(t, "the ping at node 2", func() bool { return rb.count() > 1 })
	rb.mu.Lock()
	got := slices.Clone(rb.envs)
	rb.mu.Unlock()
	if len(got) != 2 || got[0].Kind != KindCall || string(got[0].Data) != "on time" {
		t.Fatalf("node 2 got %+v, want the call, then the ping", got)
	}
	if left := got[0].Expires.Sub(sent); left < 9*time.Second || left > 11*time.Second {
		t.Fatalf("the call expires %v after it was sent, want about 10s", left)
	}
	if n := a.Dropped(); n != 1 {
		t.Fatalf("%d envelopes dropped, want the expired forward", n)
	}
}

// TestTCPTransportRedialsAfterInstantBreaks: a peer that accepts the
// dialer's connections and closes them at once, many times, is dialed
// again every time: a connection that broke as soon as it was installed
// once left the dialer waiting for it for good, so the pair never spoke
// again (a restarted node whose lower-id peer had dialed it while it died).
func TestTCPTransportRedialsAfterInstantBreaks(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a := listen(t, 1, "127.0.0.1:0", map[uint64]string{2: ln.Addr().String()})
	a.Start(&collector{})
	const breaks = 200
	for i := range breaks {
		accepted := make(chan net.Conn, 1)
		go func() {
			c, err := ln.Accept()
			if err == nil {
				accepted <- c
			}
		}()
		select {
		case c := <-accepted:
			c.Close()
		case <-time.After(10 * time.Second):
			t.Fatalf("no connection from node 1 after %d broken ones", i)
		}
	}
}

// TestHelloRefusesAnotherWireVersion: a peer whose frames are of another
// version (version 1 knew pings without an incarnation) is refused at the
// hello, saying why, rather than taken in and its frames misread.
func TestHelloRefusesAnotherWireVersion(t *testing.T) {
	for _, tc := range []struct {
		hello   []byte
		refusal string
	}{
		{[]byte{'W', 'R', 'A', 'F', 'T', 1, 7}, "wire version 1"},
		{[]byte{'W', 'R', 'A', 'F', 'T', 3, 7}, "wire version 3"},
		{[]byte{'W', 'R', 'A', 'F', 'T', 4, 7}, "wire version 4"},
		{[]byte{'H', 'T', 'T', 'P', '/', '1', 7}, "not a raft peer"},
	} {
		server, client := net.Pipe()
		go func() {
			client.Write(tc.hello)
			client.Close()
		}()
		id, err := readHello(server, bufio.NewReader(server))
		server.Close()
		if err == nil || !strings.Contains(err.Error(), tc.refusal) {
			t.Errorf("hello %q: got node %d, err %v; want an error saying %q", tc.hello, id, err, tc.refusal)
		}
	}
	server, client := net.Pipe()
	defer server.Close()
	go func() {
		client.Write(binary.AppendUvarint(helloMagic[:], 7))
		client.Close()
	}()
	if id, err := readHello(server, bufio.NewReader(server)); id != 7 || err != nil {
		t.Fatalf("this version's hello: got node %d, err %v", id, err)
	}
}
