package raft

import (
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestTCPTransportBoundsUnacknowledgedData: both ends of a connection,
// the dialer's and the listener's, give up on data unacknowledged for
// userTimeout (forward.go: how late a request may be read).
func TestTCPTransportBoundsUnacknowledgedData(t *testing.T) {
	a, b, _, rb := startPair(t)
	a.Send(2, []Envelope{{Kind: KindPing}})
	waitFor(t, "a's ping at b", func() bool { return rb.count() > 0 })
	for _, tr := range []*TCPTransport{a, b} {
		tr.mu.Lock()
		for c := range tr.conns {
			raw, err := c.(*net.TCPConn).SyscallConn()
			if err != nil {
				t.Fatal(err)
			}
			var got int
			var gerr error
			raw.Control(func(fd uintptr) {
				got, gerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT)
			})
			if gerr != nil || time.Duration(got)*time.Millisecond != userTimeout {
				t.Errorf("node %d's connection: TCP_USER_TIMEOUT %d ms (%v), want %v", tr.cfg.NodeID, got, gerr, userTimeout)
			}
		}
		tr.mu.Unlock()
	}
}
