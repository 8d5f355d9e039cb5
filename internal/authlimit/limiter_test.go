package authlimit

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock the test moves by hand; sleeping records the wait
// and moves the clock past it.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	waited []time.Duration
}

func newTestLimiter(cfg Config) (*Limiter, *fakeClock) {
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	l := New(cfg)
	l.now = func() time.Time {
		clock.mu.Lock()
		defer clock.mu.Unlock()
		return clock.now
	}
	l.sleep = func(ctx context.Context, d time.Duration) error {
		clock.mu.Lock()
		defer clock.mu.Unlock()
		clock.waited = append(clock.waited, d)
		return ctx.Err()
	}
	return l, clock
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *fakeClock) takeWaits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.waited
	c.waited = nil
	return w
}

func TestFreeFailuresThenDoublingDelayUpToTheCap(t *testing.T) {
	l, clock := newTestLimiter(Config{FreeFailures: 2, BaseDelay: 100 * time.Millisecond, MaxDelay: 500 * time.Millisecond})
	ctx := context.Background()
	ip := "192.0.2.7"
	var got []time.Duration
	for range 7 {
		if err := l.Wait(ctx, ip); err != nil {
			t.Fatal(err)
		}
		waits := clock.takeWaits()
		var w time.Duration
		if len(waits) == 1 {
			w = waits[0]
			clock.advance(w)
		}
		got = append(got, w)
		l.Failed(ip)
	}
	want := []time.Duration{0, 0, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 500 * time.Millisecond, 500 * time.Millisecond}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("attempt %d waited %v, want %v (all: %v)", i+1, got[i], want[i], got)
		}
	}
	// Another address is not held up by this one.
	if err := l.Wait(ctx, "192.0.2.8"); err != nil || len(clock.takeWaits()) != 0 {
		t.Fatal("a neighbour address waited")
	}
	// A success clears the record.
	l.Succeeded(ip)
	if err := l.Wait(ctx, ip); err != nil || len(clock.takeWaits()) != 0 {
		t.Fatal("an address waited after a successful login")
	}
}

// TestParallelAttemptsAreSpaced: a guesser opening many connections at
// once gets its attempts spaced, not all let through after one delay.
func TestParallelAttemptsAreSpaced(t *testing.T) {
	l, clock := newTestLimiter(Config{FreeFailures: 1, BaseDelay: time.Second, MaxDelay: time.Second})
	l.Failed("2001:db8::1")
	for range 3 {
		// Another address of the same /64 counts as the same client.
		if err := l.Wait(context.Background(), "2001:db8::99"); err != nil {
			t.Fatal(err)
		}
	}
	waits := clock.takeWaits()
	want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}
	if len(waits) != len(want) {
		t.Fatalf("waits %v, want %v", waits, want)
	}
	for i := range want {
		if waits[i] != want[i] {
			t.Fatalf("waits %v, want %v", waits, want)
		}
	}
}

func TestFailuresAreForgottenAfterAQuietSpell(t *testing.T) {
	l, clock := newTestLimiter(Config{FreeFailures: 1, BaseDelay: time.Second, Forget: time.Minute})
	l.Failed("192.0.2.1")
	clock.advance(time.Minute)
	if err := l.Wait(context.Background(), "192.0.2.1"); err != nil || len(clock.takeWaits()) != 0 {
		t.Fatal("an address still waited after a quiet minute")
	}
}

func TestWaitEndsWithItsContext(t *testing.T) {
	l := New(Config{FreeFailures: 1, BaseDelay: time.Hour})
	l.Failed("192.0.2.1")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Wait(ctx, "192.0.2.1"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait on a cancelled context: %v", err)
	}
}

func TestMemoryIsBounded(t *testing.T) {
	l, clock := newTestLimiter(Config{MaxAddresses: 3})
	for _, ip := range []string{"192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4"} {
		l.Failed(ip)
		clock.advance(time.Second)
	}
	if len(l.peers) != 3 {
		t.Fatalf("%d addresses remembered, want at most 3", len(l.peers))
	}
	if _, ok := l.peers[keyOf("192.0.2.1")]; ok {
		t.Fatal("the oldest address was kept and a newer one dropped")
	}
}

func TestNilLimiterLimitsNothing(t *testing.T) {
	var l *Limiter
	l.Failed("192.0.2.1")
	l.Succeeded("192.0.2.1")
	if err := l.Wait(context.Background(), "192.0.2.1"); err != nil {
		t.Fatal(err)
	}
}

func TestRemoteIP(t *testing.T) {
	for addr, want := range map[net.Addr]string{
		&net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 5}: "127.0.0.1",
		&net.TCPAddr{IP: net.ParseIP("::1"), Port: 5}:       "::1",
		pipeAddr{}: "",
	} {
		if got := RemoteIP(addr); got != want {
			t.Errorf("RemoteIP(%v) = %q, want %q", addr, got, want)
		}
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }
