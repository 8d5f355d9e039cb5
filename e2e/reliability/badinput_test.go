package reliability

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/nodetest"
)

// Limits of the bad-input test. Everything is bounded in count and time
// and goes over loopback only.
const (
	garbageConns   = 50                     // per port and kind of garbage
	slowConns      = 20                     // per port
	slowByteEvery  = 100 * time.Millisecond // a slow sender's pace
	slowFor        = 3 * time.Second
	bigPrefixConns = 32 // Kafka connections announcing a huge request
	goodDeadline   = 5 * time.Second
	closeWithin    = 3 * time.Second // a connection the server must drop
)

// amqpHeader is the AMQP 0-9-1 protocol header.
var amqpHeader = []byte("AMQP\x00\x00\x09\x01")

// TestBadInput throws garbage at a running node's Kafka and AMQP ports
// while well-behaved franz-go and amqp091-go clients keep working: random
// bytes, truncated frames, absurd length prefixes, senders that dribble one
// byte per 100 ms, and -reliability.conns idle connections. Every
// well-behaved operation must complete within 5 s, the ports the node must
// drop (absurd lengths) must be dropped, a request announcing a huge size
// must not make the node allocate it, and once the garbage stops the
// node's goroutines return to about where they were.
func TestBadInput(t *testing.T) {
	if testing.Short() {
		t.Skip("opens thousands of connections; skipped with -short")
	}
	raiseFileLimit(t, uint64(2**connsFlag+2048))
	n := nodetest.Start(t, newNodeLog(t, slog.LevelError).option())
	kafkaAddr, amqpAddr := n.KafkaAddr(), n.AMQPAddr()
	good := startGoodClients(t, kafkaAddr, nodetest.AMQPURL(n))
	baseline := runtime.NumGoroutine()
	rng := newRand(t)

	for round := 1; round <= *badRoundsFlag; round++ {
		step := func(name string, fn func()) {
			start := time.Now()
			fn()
			t.Logf("round %d, %s: done in %v; good clients so far: %s", round, name, time.Since(start).Round(time.Millisecond), good.summary())
		}
		step("random bytes", func() {
			// One random source per goroutine: a rand.Rand is not safe
			// for concurrent use.
			r1, r2, r3 := subRand(rng), subRand(rng), subRand(rng)
			parallel(
				func() { garbage(t, kafkaAddr, garbageConns, func(int) []byte { return randomBytes(r1, 1, 8192) }) },
				func() { garbage(t, amqpAddr, garbageConns, func(int) []byte { return randomBytes(r2, 1, 8192) }) },
				func() {
					garbage(t, amqpAddr, garbageConns, func(int) []byte { return append(append([]byte{}, amqpHeader...), randomBytes(r3, 1, 8192)...) })
				},
			)
		})
		step("truncated frames", func() {
			frame := kafkaAPIVersionsFrame()
			method := amqpFrame(1, 0, make([]byte, 40)) // a method frame cut short below
			parallel(
				func() { garbage(t, kafkaAddr, garbageConns, func(i int) []byte { return frame[:1+i%(len(frame)-1)] }) },
				func() {
					garbage(t, amqpAddr, garbageConns, func(i int) []byte {
						return append(append([]byte{}, amqpHeader...), method[:1+i%(len(method)-1)]...)
					})
				},
			)
		})
		step("absurd length prefixes", func() {
			kafkaSizes := [][]byte{{0x7f, 0xff, 0xff, 0xff}, {0xff, 0xff, 0xff, 0xff}, {0x80, 0, 0, 0}}
			parallel(
				func() { mustBeDropped(t, "kafka", kafkaAddr, kafkaSizes...) },
				func() {
					var frames [][]byte
					for _, size := range []uint32{0xffffffff, 0x7fffffff, 1 << 30} {
						f := append([]byte{}, amqpHeader...)
						f = append(f, 1, 0, 0)
						frames = append(frames, binary.BigEndian.AppendUint32(f, size))
					}
					mustBeDropped(t, "amqp", amqpAddr, frames...)
				},
			)
			checkBigPrefixMemory(t, kafkaAddr)
		})
		step("slow senders", func() {
			parallel(
				func() { slowSenders(t, kafkaAddr, kafkaAPIVersionsFrame()) },
				func() { slowSenders(t, amqpAddr, amqpHeader) },
			)
		})
		step(fmt.Sprintf("%d idle connections", *connsFlag), func() {
			parallel(
				func() { holdConnections(t, kafkaAddr, *connsFlag/2) },
				func() { holdConnections(t, amqpAddr, *connsFlag/2) },
			)
		})
	}

	good.stop(t)
	if err := n.Err(); err != nil {
		t.Errorf("a server of the node stopped: %v", err)
	}
	// The node's goroutines for the garbage connections must be gone.
	settled := waitFor(15*time.Second, func() bool { return runtime.NumGoroutine() <= baseline+100 })
	t.Logf("goroutines: %d before the garbage, %d after (settled: %v)", baseline, runtime.NumGoroutine(), settled)
	if !settled {
		t.Errorf("goroutines did not return near %d after the garbage stopped: %d", baseline, runtime.NumGoroutine())
	}
}

// raiseFileLimit lifts RLIMIT_NOFILE to at least want (up to the hard
// limit) for this process, or fails the test if that is not enough.
func raiseFileLimit(t *testing.T, want uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur >= want {
		return
	}
	lim.Cur = min(want, lim.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur < want {
		t.Fatalf("need %d open files, the limit is %d (%v): raise the hard limit (ulimit -Hn, as root) or lower -reliability.conns", want, lim.Cur, err)
	}
}

func parallel(fns ...func()) {
	var wg sync.WaitGroup
	for _, fn := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn()
		}()
	}
	wg.Wait()
}

// subRand derives an independent random source from rng.
func subRand(rng *rand.Rand) *rand.Rand { return rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64())) }

func randomBytes(rng *rand.Rand, minLen, maxLen int) []byte {
	b := make([]byte, minLen+rng.IntN(maxLen-minLen+1))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// kafkaAPIVersionsFrame is a well-formed ApiVersions v3 request, size
// prefix included.
func kafkaAPIVersionsFrame() []byte {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "reliability", "1"
	b := kmsg.NewRequestFormatter(kmsg.FormatterClientID("bad-input")).AppendRequest(nil, req, 1)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// amqpFrame encodes one AMQP frame: type, channel, size, payload, frame end.
func amqpFrame(typ byte, channel uint16, payload []byte) []byte {
	f := []byte{typ}
	f = binary.BigEndian.AppendUint16(f, channel)
	f = binary.BigEndian.AppendUint32(f, uint32(len(payload)))
	f = append(f, payload...)
	return append(f, 0xCE)
}

func dial(t *testing.T, addr string) (net.Conn, error) {
	return net.DialTimeout("tcp", addr, 5*time.Second)
}

// garbage opens count connections in parallel, writes payload(i) on the
// i-th, half-closes nothing, and reads until the server closes it or
// closeWithin passes; then closes it. The node may answer or not: only its
// survival (and the good clients) are judged.
func garbage(t *testing.T, addr string, count int, payload func(int) []byte) {
	var wg sync.WaitGroup
	var dropped atomic.Int64
	for i := range count {
		data := payload(i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := dial(t, addr)
			if err != nil {
				t.Errorf("dial %s: %v", addr, err)
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(closeWithin))
			c.Write(data) // the server may close before reading it all
			if _, err := io.Copy(io.Discard, c); !isTimeout(err) {
				dropped.Add(1)
			}
		}()
	}
	wg.Wait()
	t.Logf("%s: %d of %d garbage connections dropped by the node within %v", addr, dropped.Load(), count, closeWithin)
}

// mustBeDropped sends each payload on its own connection and requires the
// node to close it within closeWithin without reading further.
func mustBeDropped(t *testing.T, proto, addr string, payloads ...[]byte) {
	for _, p := range payloads {
		c, err := dial(t, addr)
		if err != nil {
			t.Errorf("dial %s: %v", addr, err)
			continue
		}
		c.SetDeadline(time.Now().Add(closeWithin))
		if _, err := c.Write(p); err != nil {
			t.Errorf("%s: write %x: %v", proto, p, err)
		}
		if _, err := io.Copy(io.Discard, c); isTimeout(err) {
			t.Errorf("%s: the node kept a connection open for %v after % x", proto, closeWithin, p)
		}
		c.Close()
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// checkBigPrefixMemory opens bigPrefixConns Kafka connections that each
// announce a request just under socket.request.max.bytes and send a few
// bytes of it, and requires the node's heap not to grow by the announced
// sizes (it reads large frames as their bytes arrive).
func checkBigPrefixMemory(t *testing.T, addr string) {
	const announced = 99 << 20
	before := heapInUse()
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range bigPrefixConns {
		c, err := dial(t, addr)
		if err != nil {
			t.Errorf("dial: %v", err)
			return
		}
		conns = append(conns, c)
		msg := binary.BigEndian.AppendUint32(nil, announced)
		c.Write(append(msg, make([]byte, 100)...))
	}
	time.Sleep(500 * time.Millisecond) // let the node read the prefixes and take its buffers
	grown := int64(heapInUse()) - int64(before)
	perConn := grown / bigPrefixConns
	t.Logf("%d connections announcing %d-byte requests and sending 104 bytes: heap grew %d MiB (%d KiB per connection)",
		bigPrefixConns, announced, grown>>20, perConn>>10)
	if perConn > 16<<20 {
		t.Errorf("the node holds %d MiB per connection that announced a %d MiB request and sent 104 bytes", perConn>>20, announced>>20)
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// slowSenders sends frame one byte per slowByteEvery on slowConns
// connections for at most slowFor each.
func slowSenders(t *testing.T, addr string, frame []byte) {
	var wg sync.WaitGroup
	var sent atomic.Int64
	for range slowConns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := dial(t, addr)
			if err != nil {
				t.Errorf("dial %s: %v", addr, err)
				return
			}
			defer c.Close()
			go io.Copy(io.Discard, c) // ends when c closes
			tick := time.NewTicker(slowByteEvery)
			defer tick.Stop()
			deadline := time.After(slowFor)
			for i := 0; i < len(frame); i++ {
				select {
				case <-deadline:
					return
				case <-tick.C:
				}
				c.SetWriteDeadline(time.Now().Add(time.Second))
				if _, err := c.Write(frame[i : i+1]); err != nil {
					return // dropped by the node: fine
				}
				sent.Add(1)
			}
		}()
	}
	wg.Wait()
	t.Logf("%s: %d slow senders sent %d bytes in all", addr, slowConns, sent.Load())
}

// holdConnections opens count idle connections, holds them while the good
// clients work for a moment, and closes them.
func holdConnections(t *testing.T, addr string, count int) {
	conns := make([]net.Conn, 0, count)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range count {
		c, err := dial(t, addr)
		if err != nil {
			t.Errorf("connection %d to %s: %v", len(conns)+1, addr, err)
			return
		}
		conns = append(conns, c)
	}
	time.Sleep(2 * time.Second) // the load itself: good clients run while these are open
	alive := 0
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); isTimeout(err) {
			alive++
		}
	}
	t.Logf("%s: held %d idle connections for 2s, %d still open", addr, count, alive)
}

// goodClients are the well-behaved clients: a franz-go producer and
// consumer, and an amqp091-go publisher (confirms) and consumer. Every
// operation must finish within goodDeadline.
type goodClients struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu                   sync.Mutex
	produced, consumed   map[string]bool
	published, delivered map[string]bool
	ops                  int
	failures             []string
	slowest              time.Duration
}

const (
	goodTopic = "good"
	goodQueue = "good-q"
	goodEvery = 20 * time.Millisecond
)

func startGoodClients(t *testing.T, kafkaAddr, amqpURL string) *goodClients {
	t.Helper()
	createTopic(t, kafkaAddr, goodTopic, 1, nil)
	declareQueues(t, amqpURL, goodQueue)
	ctx, cancel := context.WithCancel(context.Background())
	g := &goodClients{cancel: cancel, produced: map[string]bool{}, consumed: map[string]bool{},
		published: map[string]bool{}, delivered: map[string]bool{}}

	producer := newKafkaClient(t, kafkaAddr, kgo.DefaultProduceTopic(goodTopic), kgo.RequiredAcks(kgo.AllISRAcks()))
	consumer := newKafkaClient(t, kafkaAddr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{goodTopic: {0: kgo.NewOffset().AtStart()}}))
	conn, err := amqp.Dial(amqpURL)
	if err != nil {
		t.Fatalf("amqp dial: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	pubCh, err := conn.Channel()
	if err == nil {
		err = pubCh.Confirm(false)
	}
	var deliveries <-chan amqp.Delivery
	if err == nil {
		var subCh *amqp.Channel
		if subCh, err = conn.Channel(); err == nil {
			deliveries, err = subCh.Consume(goodQueue, "good", true, false, false, false, nil)
		}
	}
	if err != nil {
		t.Fatalf("amqp setup: %v", err)
	}

	g.wg.Add(4)
	go func() { // Kafka producer
		defer g.wg.Done()
		for i := 0; g.pace(ctx); i++ {
			v := fmt.Sprintf("good-%d", i)
			g.op("kafka produce", func(opCtx context.Context) error {
				err := producer.ProduceSync(opCtx, &kgo.Record{Value: []byte(v)}).FirstErr()
				if err == nil {
					g.mu.Lock()
					g.produced[v] = true
					g.mu.Unlock()
				}
				return err
			})
		}
	}()
	go func() { // Kafka consumer
		defer g.wg.Done()
		for ctx.Err() == nil {
			fs := consumer.PollFetches(ctx)
			fs.EachError(func(_ string, _ int32, err error) {
				if !errors.Is(err, context.Canceled) {
					g.fail("kafka fetch: %v", err)
				}
			})
			g.mu.Lock()
			fs.EachRecord(func(r *kgo.Record) { g.consumed[string(r.Value)] = true })
			g.mu.Unlock()
		}
	}()
	go func() { // AMQP publisher
		defer g.wg.Done()
		for i := 0; g.pace(ctx); i++ {
			id := fmt.Sprintf("good-%d", i)
			g.op("amqp publish", func(opCtx context.Context) error {
				dc, err := pubCh.PublishWithDeferredConfirmWithContext(opCtx, "", goodQueue, false, false,
					amqp.Publishing{MessageId: id, DeliveryMode: amqp.Persistent, Body: []byte(id)})
				if err != nil {
					return err
				}
				ok, err := dc.WaitContext(opCtx)
				if err == nil && !ok {
					err = errors.New("nacked")
				}
				if err == nil {
					g.mu.Lock()
					g.published[id] = true
					g.mu.Unlock()
				}
				return err
			})
		}
	}()
	go func() { // AMQP consumer
		defer g.wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case d, ok := <-deliveries:
				if !ok {
					g.fail("amqp consumer: delivery channel closed")
					return
				}
				g.mu.Lock()
				g.delivered[d.MessageId] = true
				g.mu.Unlock()
			}
		}
	}()
	return g
}

// pace waits for the next operation slot; false once ctx ends.
func (g *goodClients) pace(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(goodEvery):
		return true
	}
}

// op runs one operation with goodDeadline, recording how long it took.
func (g *goodClients) op(name string, fn func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), goodDeadline)
	defer cancel()
	start := time.Now()
	err := fn(ctx)
	took := time.Since(start)
	g.mu.Lock()
	g.ops++
	g.slowest = max(g.slowest, took)
	g.mu.Unlock()
	if err != nil {
		g.fail("%s failed after %v: %v", name, took.Round(time.Millisecond), err)
	}
}

func (g *goodClients) fail(format string, args ...any) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.failures = append(g.failures, fmt.Sprintf(format, args...))
}

func (g *goodClients) summary() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return fmt.Sprintf("%d operations, slowest %v, %d failures", g.ops, g.slowest.Round(time.Millisecond), len(g.failures))
}

// stop ends the clients after everything produced and published was
// consumed (or goodDeadline passed), and reports what went wrong.
func (g *goodClients) stop(t *testing.T) {
	t.Helper()
	caughtUp := waitFor(goodDeadline, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return covers(g.consumed, g.produced) && covers(g.delivered, g.published)
	})
	g.cancel()
	g.wg.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	t.Logf("good clients: %d operations, slowest %v; kafka produced %d consumed %d; amqp confirmed %d delivered %d",
		g.ops, g.slowest.Round(time.Millisecond), len(g.produced), len(g.consumed), len(g.published), len(g.delivered))
	if !caughtUp {
		t.Errorf("the consumers did not receive everything the producers got acknowledged within %v", goodDeadline)
	}
	for i, f := range g.failures {
		if i == maxReported {
			t.Errorf("... and %d more failures", len(g.failures)-maxReported)
			break
		}
		t.Errorf("good client: %s", f)
	}
	if g.ops == 0 || len(g.produced) == 0 || len(g.published) == 0 {
		t.Errorf("the good clients did nothing")
	}
}

// covers reports whether every key of want is in have.
func covers(have, want map[string]bool) bool {
	for k := range want {
		if !have[k] {
			return false
		}
	}
	return true
}
