package netserve

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// refused reports whether the server closed c without a byte: a read
// ends in EOF (or a reset) rather than the read deadline.
func refused(t *testing.T, c net.Conn) bool {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return err != nil
}

// TestLimitListenerClosesConnectionsOverTheCap: with two connections
// open, a third is closed at once, and a slot freed by a connection that
// ends is taken by the next. The protocol gets the *net.TCPConn itself
// (sendfile and socket options need it).
func TestLimitListenerClosesConnectionsOverTheCap(t *testing.T) {
	s, started := newEchoServer(t, false)
	var notTCP atomic.Int32
	newConn := s.hooks.NewConn
	s.hooks.NewConn = func(nc net.Conn) *echoConn {
		if _, ok := nc.(*net.TCPConn); !ok {
			notTCP.Add(1)
		}
		return newConn(nc)
	}
	raw := listen(t)
	ln := LimitListener(raw, 2, "echo", slog.New(slog.DiscardHandler))
	served := serveOn(s, ln)

	first := dialEcho(t, raw.Addr().String())
	<-started
	dialEcho(t, raw.Addr().String())
	<-started
	if over := dial(t, raw.Addr().String()); !refused(t, over) {
		t.Fatal("a third connection over a cap of two was not closed")
	}

	first.Close()
	// The slot comes back once the server has seen the close; until then
	// a new connection may still be refused.
	deadline := time.Now().Add(testTimeout)
	for {
		c := dial(t, raw.Addr().String())
		if !refused(t, c) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no connection admitted after one of two ended")
		}
	}
	if n := notTCP.Load(); n > 0 {
		t.Fatalf("the protocol was handed %d connections that are not the socket", n)
	}

	shutdown(t, s, served)
	if n := ln.(*limitListener).open.Load(); n != 0 {
		t.Fatalf("%d slots still taken after shutdown", n)
	}
}

// TestLimitListenerUnderHTTP: net/http closes the connections it gets
// from Accept itself; closing one gives its slot back.
func TestLimitListenerUnderHTTP(t *testing.T) {
	raw := listen(t)
	ln := LimitListener(raw, 1, "http", slog.New(slog.DiscardHandler))
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	})}
	go srv.Serve(ln)
	defer srv.Close()

	get := func() error {
		// A new client each time: no connection is kept alive across calls.
		cl := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: testTimeout}
		resp, err := cl.Get("http://" + raw.Addr().String() + "/")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
	holder := dial(t, raw.Addr().String()) // takes the one slot
	deadline := time.Now().Add(testTimeout)
	for ln.(*limitListener).open.Load() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the first connection was not accepted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if get() == nil {
		t.Fatal("a request got through while the only slot was taken")
	}
	holder.Close()
	for get() != nil {
		if time.Now().After(deadline) {
			t.Fatal("no request served after the slot was given back")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestLimitListenerWithoutCap(t *testing.T) {
	raw := listen(t)
	defer raw.Close()
	if ln := LimitListener(raw, 0, "x", slog.New(slog.DiscardHandler)); ln != raw {
		t.Fatal("a cap of 0 wrapped the listener")
	}
}

// TestDefaultCapsLeaveTheLogsTheirHalf: whatever the number of listeners,
// their default caps together stay within what seglog leaves of the
// open-file limit (it keeps half for segment files), with an eighth to
// spare for everything else.
func TestDefaultCapsLeaveTheLogsTheirHalf(t *testing.T) {
	limit := openFileLimit()
	if limit <= 0 {
		limit = fallbackOpenFiles
	}
	for listeners := 1; listeners <= 8; listeners++ {
		if all := listeners * DefaultMaxConnections(listeners); all > limit/2-limit/8 {
			t.Errorf("%d listeners may hold %d connections: more than %d of the limit %d, which seglog's half and a reserve leave", listeners, all, limit/2-limit/8, limit)
		}
	}
}
