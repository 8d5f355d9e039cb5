package kafka

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// waitForWaiters polls until b has n waiters: a waiter parks on a channel,
// which nothing outside can observe.
func waitForWaiters(t *testing.T, b *requestBudget, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b.mu.Lock()
		got := len(b.waiters)
		b.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// acquireAsync runs acquire on a goroutine; the channel gets its result.
func acquireAsync(b *requestBudget, cost int64, stop <-chan struct{}) <-chan bool {
	done := make(chan bool, 1)
	go func() { done <- b.acquire(cost, stop) }()
	return done
}

func TestRequestBudget(t *testing.T) {
	b := newRequestBudget(100)
	never := make(chan struct{})
	if !b.acquire(60, never) || b.inUse() != 60 {
		t.Fatalf("first acquire: in use %d", b.inUse())
	}
	if b.tryAcquire(50) {
		t.Fatal("tryAcquire went over the limit")
	}
	big := acquireAsync(b, 50, never)
	waitForWaiters(t, b, 1)
	// First fit: a request that fits is not held up behind one that
	// does not, and tryAcquire leaves room to the waiter.
	if !b.acquire(30, never) {
		t.Fatal("a fitting acquire was refused")
	}
	if b.tryAcquire(5) {
		t.Fatal("tryAcquire took room while a request waits")
	}
	b.release(60)
	if !<-big || b.inUse() != 80 {
		t.Fatalf("waiter not granted on release: in use %d", b.inUse())
	}
	b.release(30)
	b.release(50)

	// A request larger than the budget runs alone.
	if !b.acquire(500, never) {
		t.Fatal("oversized acquire refused on an empty budget")
	}
	small := acquireAsync(b, 1, never)
	waitForWaiters(t, b, 1)
	b.release(500)
	if !<-small {
		t.Fatal("waiter not granted")
	}
	b.release(1)

	// A waiter that is stopped gives up and takes nothing.
	b.acquire(90, never)
	stop := make(chan struct{})
	stopped := acquireAsync(b, 20, stop)
	waitForWaiters(t, b, 1)
	close(stop)
	if <-stopped {
		t.Fatal("stopped waiter acquired")
	}
	waitForWaiters(t, b, 0)
	b.release(90)
	if b.inUse() != 0 {
		t.Fatalf("in use %d after every release", b.inUse())
	}

	var unbounded *requestBudget
	if !unbounded.acquire(1<<40, never) || !unbounded.tryAcquire(1<<40) {
		t.Fatal("a nil budget refused")
	}
	unbounded.release(1 << 40)
}

// A connection whose request does not fit the server's request budget
// waits, reading nothing more, until earlier requests are answered.
func TestRequestBudgetHoldsConnections(t *testing.T) {
	const limit = 2 << 20
	ts := startServer(t, withServer(func(s *Server) { s.budget = newRequestBudget(limit) }))
	ts.createTopic(t, "budget", 1, map[string]string{"max.message.bytes": "4194304"})
	held, release := holdAppends(t, "budget")

	first := ts.dial(t)
	big := produceReq(t, "budget", 0, -1, strings.Repeat("a", 1536<<10))
	s1 := sent{big, first.send(big)}
	<-held // its frame (1.5 MiB) is charged while the append waits

	second := ts.dial(t)
	next := produceReq(t, "budget", 0, -1, strings.Repeat("b", 1<<20))
	s2 := sent{next, second.send(next)}
	waitForWaiters(t, ts.s.budget, 1)
	ping := kmsg.NewPtrApiVersionsRequest()
	second.send(ping) // not read while the produce before it waits
	second.expectNothing(100 * time.Millisecond)

	// Other connections with requests that fit are served meanwhile.
	ts.dial(t).roundTrip(kmsg.NewPtrApiVersionsRequest())

	close(release)
	first.recvProduce(s1)
	second.recvProduce(s2)
	second.recv(ping, s2.corr+1)
	waitBudget(t, ts.s.budget, 0)
}

// Connections that announce large requests and stall hold none of the
// request budget and at most the up-front allowance: other clients are
// served as usual.
func TestStalledRequestsHoldNoBudget(t *testing.T) {
	const limit = 64 << 20
	ts := startServer(t, withServer(func(s *Server) {
		s.budget, s.upFront = newRequestBudget(limit), newRequestBudget(limit/4)
	}))
	ts.createTopic(t, "stalled", 1, nil)
	for range 10 {
		c := ts.dial(t)
		// A produce request of 50 MiB announced; 8 bytes of it sent.
		c.write([]byte{0x03, 0x20, 0, 0, 0, 0, 0, 9, 0, 0, 0, 1})
	}
	// Two of them take a frameUpFront buffer each, which is the whole
	// allowance; the others start small.
	waitBudget(t, ts.s.upFront, limit/4)
	produceSync(t, ts.client(t), "stalled", 0, strings.Repeat("x", 100<<10))
	waitBudget(t, ts.s.budget, 0)
	if used := ts.s.upFront.inUse(); used != limit/4 {
		t.Errorf("%d bytes taken up front, want the whole %d allowance", used, limit/4)
	}
}

// waitBudget polls until b has want bytes charged: a connection returns
// its charge just after writing the response the client waits for.
func waitBudget(t *testing.T, b *requestBudget, want int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for b.inUse() != want {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes charged, want %d", b.inUse(), want)
		}
		time.Sleep(time.Millisecond)
	}
}
