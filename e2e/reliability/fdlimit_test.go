package reliability

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The file-descriptor tests run `wharf serve` under ulimit -n
// -reliability.fd-limit and open 150 idle connections more than that at
// its Kafka port.
const (
	fdOver        = 150
	fdRecoverTime = 10 * time.Second
)

// TestFileDescriptorsRunOut: with no connection cap, idle connections use
// up the broker's descriptors. The accept loop must back off rather than
// end the process; clients connected before may be refused what needs a
// new descriptor but are never acknowledged anything lost; once the idle
// connections close the broker accepts again, new and old clients work,
// and every acknowledged record and confirmed message is there. A clean
// stop still exits 0.
func TestFileDescriptorsRunOut(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the wharf binary; skipped with -short")
	}
	fdLimit := *fdLimitFlag
	fdFlood := fdLimit + fdOver
	b := startLimitedBroker(t, fdLimit, "--max-connections=0")
	old := connectClients(t, b)
	old.mustRoundTrip(t, b, "before the flood")

	flood := openIdleFlood(t, b.kafka, fdFlood)
	if !waitFor(30*time.Second, func() bool { return b.logCount("too many open files") >= 8 }) {
		t.Fatalf("the broker never ran out of descriptors (%d open)\n%s", b.openFiles(), b.logTail())
	}
	t.Logf("%d idle connections: broker holds %d of %d descriptors, %d accept retries logged",
		fdFlood, b.openFiles(), fdLimit, b.logCount("too many open files"))
	if !b.running() {
		t.Fatalf("the broker exited when it ran out of descriptors: %v\n%s", b.waitErr, b.logTail())
	}
	// What needs no new descriptor works; what does (an AMQP persist
	// writes the queue's recovery point) may be refused, honestly: an
	// error or a nack, never an acknowledgement of something lost.
	if err := old.roundTrip("out of descriptors"); err != nil {
		t.Logf("out of descriptors, a client connected before got: %v", err)
	}

	released := time.Now()
	flood.close()
	fresh := connectClients(t, b)
	t.Logf("after the idle connections closed, new clients connected in %v", time.Since(released).Round(time.Millisecond))
	fresh.mustRoundTrip(t, b, "after the flood, new clients")
	old.mustRoundTrip(t, b, "after the flood, clients connected before")

	checkAcknowledged(t, b, old, fresh)
	b.stop(t)
}

// TestConnectionCapPerListener: under the default cap (three eighths of
// the open-file limit shared by the broker's three listeners here: an
// eighth each) connections beyond it are closed at once,
// the descriptors never run out, clients connected before and the other
// listeners are unaffected, and a freed slot is taken again.
func TestConnectionCapPerListener(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the wharf binary; skipped with -short")
	}
	fdLimit := *fdLimitFlag
	fdFlood, fdDefaultCap := fdLimit+fdOver, fdLimit*3/8/3 // netserve.DefaultMaxConnections(3)
	b := startLimitedBroker(t, fdLimit)
	old := connectClients(t, b)
	old.mustRoundTrip(t, b, "before the flood")
	flood := openIdleFlood(t, b.kafka, fdFlood)
	if !waitFor(30*time.Second, func() bool { return int(flood.closedByBroker.Load()) >= fdFlood-fdDefaultCap }) {
		t.Fatalf("%d of %d connections over a cap of %d closed by the broker\n%s",
			flood.closedByBroker.Load(), fdFlood-fdDefaultCap, fdDefaultCap, b.logTail())
	}
	t.Logf("%d connections to the Kafka port: %d closed at once, broker holds %d of %d descriptors",
		fdFlood, flood.closedByBroker.Load(), b.openFiles(), fdLimit)
	if b.logCount("connection limit reached") == 0 || b.logCount("listener=kafka") == 0 {
		t.Errorf("the refusals were not logged with the listener's name\n%s", b.logTail())
	}
	if b.logCount("too many open files") > 0 {
		t.Errorf("the broker ran out of descriptors under the cap\n%s", b.logTail())
	}
	// Clients connected before are untouched: the logs still have
	// descriptors, so even an AMQP persist goes through.
	old.mustRoundTrip(t, b, "at the cap")

	// The AMQP and HTTP listeners have slots of their own.
	conn, err := amqp.Dial(b.amqpURL())
	if err != nil {
		t.Fatalf("AMQP while the Kafka port is at its cap: %v", err)
	}
	conn.Close()
	req, _ := http.NewRequest("GET", "http://"+b.http+"/api/overview", nil)
	req.SetBasicAuth("guest", "guest")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("HTTP while the Kafka port is at its cap: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("HTTP while the Kafka port is at its cap: %s", resp.Status)
	}

	flood.close()
	fresh := connectClients(t, b)
	fresh.mustRoundTrip(t, b, "after the flood")
	checkAcknowledged(t, b, old, fresh)
	b.stop(t)
}

// limitedBroker is `wharf serve` run as a child process under a lowered
// open-file limit, on loopback ports it picked itself.
type limitedBroker struct {
	cmd               *exec.Cmd
	kafka, amqp, http string
	logPath           string
	exited            chan struct{}
	waitErr           error
}

var (
	wharfBuild    sync.Once
	wharfBinDir   string
	wharfBin      string
	wharfBuildErr error
)

// wharfBinary builds cmd/wharf once per test process; TestMain removes it
// (removeWharfBinary).
func wharfBinary(t *testing.T) string {
	t.Helper()
	wharfBuild.Do(func() {
		dir, err := os.MkdirTemp("", "wharf-reliability-bin-")
		if err != nil {
			wharfBuildErr = err
			return
		}
		wharfBinDir = dir
		wharfBin = filepath.Join(dir, "wharf")
		cmd := exec.Command(goTool(), "build", "-o", wharfBin, "./cmd/wharf")
		cmd.Dir = moduleRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			wharfBuildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if wharfBuildErr != nil {
		t.Fatal(wharfBuildErr)
	}
	return wharfBin
}

func removeWharfBinary() {
	if wharfBinDir != "" {
		os.RemoveAll(wharfBinDir)
	}
}

// startLimitedBroker runs the broker under ulimit -n nofile with args
// added to its command line, and waits until it has printed its listeners.
func startLimitedBroker(t *testing.T, nofile int, args ...string) *limitedBroker {
	t.Helper()
	dir := workDir(t)
	b := &limitedBroker{logPath: filepath.Join(dir, "broker.log"), exited: make(chan struct{})}
	logFile, err := os.Create(b.logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close() // the child has its own descriptor
	argv := append([]string{"sh", "-c", fmt.Sprintf(`ulimit -n %d && exec "$@"`, nofile), "sh", wharfBinary(t), "serve",
		"--data-dir", filepath.Join(dir, "data"),
		"--kafka-addr", "127.0.0.1:0", "--amqp-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--nats-addr="}, args...)
	b.cmd = exec.Command(argv[0], argv[1:]...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WHARF_") {
			b.cmd.Env = append(b.cmd.Env, kv)
		}
	}
	b.cmd.Stderr = logFile
	stdout, err := b.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// exec keeps the pid, so the signals and /proc reach the broker.
	go func() {
		b.waitErr = b.cmd.Wait()
		close(b.exited)
	}()
	t.Cleanup(func() {
		if b.running() {
			b.cmd.Process.Kill()
			<-b.exited
		}
	})

	sc := bufio.NewScanner(stdout)
	for sc.Scan() && (b.kafka == "" || b.amqp == "" || b.http == "") {
		line := sc.Text()
		addr := func(prefix string) string {
			return strings.Fields(strings.TrimPrefix(line, prefix))[0]
		}
		switch {
		case strings.HasPrefix(line, "Kafka listening on "):
			b.kafka = addr("Kafka listening on ")
		case strings.HasPrefix(line, "AMQP listening on "):
			b.amqp = addr("AMQP listening on ")
		case strings.HasPrefix(line, "HTTP management API listening on "):
			b.http = addr("HTTP management API listening on ")
		}
	}
	if b.http == "" {
		t.Fatalf("the broker did not report its listeners\n%s", b.logTail())
	}
	go io.Copy(io.Discard, stdout) // until the process exits
	return b
}

func (b *limitedBroker) amqpURL() string { return "amqp://guest:guest@" + b.amqp + "/" }

func (b *limitedBroker) running() bool {
	select {
	case <-b.exited:
		return false
	default:
		return true
	}
}

// openFiles counts the broker's open descriptors.
func (b *limitedBroker) openFiles() int {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", b.cmd.Process.Pid))
	if err != nil {
		return -1
	}
	return len(fds)
}

// logCount counts the log lines containing s.
func (b *limitedBroker) logCount(s string) int {
	data, _ := os.ReadFile(b.logPath)
	return strings.Count(string(data), s)
}

func (b *limitedBroker) logTail() string {
	data, _ := os.ReadFile(b.logPath)
	return string(tail(data, 4000))
}

// stop sends SIGTERM and requires a clean exit.
func (b *limitedBroker) stop(t *testing.T) {
	t.Helper()
	b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.exited:
	case <-time.After(45 * time.Second):
		t.Fatalf("the broker did not stop within 45 s of SIGTERM\n%s", b.logTail())
	}
	if b.waitErr != nil {
		t.Fatalf("the broker exited with %v\n%s", b.waitErr, b.logTail())
	}
}

// idleFlood is a set of idle TCP connections, each watched by a goroutine
// that notices when the broker closes it.
type idleFlood struct {
	conns          []net.Conn
	closedByBroker atomic.Int64
	wg             sync.WaitGroup
}

// openIdleFlood opens count connections to addr. They all connect: those
// the broker cannot accept wait in the kernel's backlog.
func openIdleFlood(t *testing.T, addr string, count int) *idleFlood {
	t.Helper()
	f := &idleFlood{}
	t.Cleanup(f.close)
	for i := range count {
		c, err := dial(t, addr)
		if err != nil {
			t.Fatalf("idle connection %d: %v", i+1, err)
		}
		f.conns = append(f.conns, c)
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			_, err := io.Copy(io.Discard, c)
			if !errors.Is(err, net.ErrClosed) {
				f.closedByBroker.Add(1) // EOF or a reset: the broker's doing
			}
		}()
	}
	return f
}

// close closes every connection and waits for the watchers. Idempotent.
func (f *idleFlood) close() {
	for _, c := range f.conns {
		c.Close()
	}
	f.wg.Wait()
}

// fdClients are a franz-go producer and consumer and an amqp091-go
// connection publishing with confirms and getting, connected at one
// moment; they record what the broker acknowledged.
type fdClients struct {
	producer, consumer *kgo.Client
	pub, get           *amqp.Channel
	produced           []string // acknowledged record values, in order
	confirmed          []string // confirmed message bodies, in order
	rounds             int
}

const (
	fdTopic = "fd-topic"
	fdQueue = "fd-queue"
)

// connectClients connects new clients, creating the topic and queue the
// first time. Connecting must succeed within fdRecoverTime: a broker
// that has just got descriptors back takes the backlog first.
func connectClients(t *testing.T, b *limitedBroker) *fdClients {
	t.Helper()
	deadline := time.Now().Add(fdRecoverTime)
	var conn *amqp.Connection
	var err error
	for {
		if conn, err = amqp.DialConfig(b.amqpURL(), amqp.Config{Dial: amqp.DefaultDial(2 * time.Second)}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("AMQP connect: %v\n%s", err, b.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Cleanup(func() { conn.Close() })
	c := &fdClients{}
	if c.pub, err = conn.Channel(); err == nil {
		err = c.pub.Confirm(false)
	}
	if err == nil {
		_, err = c.pub.QueueDeclare(fdQueue, true, false, false, false, nil)
	}
	if err == nil {
		c.get, err = conn.Channel()
	}
	if err != nil {
		t.Fatalf("AMQP setup: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), fdRecoverTime)
	defer cancel()
	// franz-go keeps dialling until ctx ends. The topic exists from the
	// second time on.
	_, err = kadm.NewClient(newKafkaClient(t, b.kafka)).CreateTopic(ctx, 1, 1, nil, fdTopic)
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatalf("Kafka connect: %v\n%s", err, b.logTail())
	}
	c.producer = newKafkaClient(t, b.kafka, kgo.DefaultProduceTopic(fdTopic), kgo.RequiredAcks(kgo.AllISRAcks()))
	c.consumer = newKafkaClient(t, b.kafka, kgo.FetchMaxWait(100*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{fdTopic: {0: kgo.NewOffset().AtStart()}}))
	return c
}

// roundTrip produces and consumes one record and publishes (confirmed)
// and gets one message, each within 10 s, and returns the first failure.
// The consumer reads from the start and waits for the new record.
func (c *fdClients) roundTrip(when string) error {
	c.rounds++
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	value := fmt.Sprintf("%s #%d", when, c.rounds)
	if err := c.producer.ProduceSync(ctx, &kgo.Record{Value: []byte(value)}).FirstErr(); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	c.produced = append(c.produced, value)
	for got := false; !got; {
		fetches := c.consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("consume %q: %w", value, err)
		}
		if err := fetches.Err(); err != nil {
			return fmt.Errorf("fetch: %w", err)
		}
		fetches.EachRecord(func(r *kgo.Record) { got = got || string(r.Value) == value })
	}

	dc, err := c.pub.PublishWithDeferredConfirmWithContext(ctx, "", fdQueue, false, false,
		amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte(value)})
	if err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	if ok, err := dc.WaitContext(ctx); err != nil || !ok {
		return fmt.Errorf("publish confirm: ok=%v, %v", ok, err)
	}
	c.confirmed = append(c.confirmed, value)
	d, ok, err := c.get.Get(fdQueue, false)
	if err != nil || !ok {
		return fmt.Errorf("basic.get: ok=%v, %v", ok, err)
	}
	// Requeued, so checkAcknowledged finds every message.
	if err := d.Nack(false, true); err != nil {
		return fmt.Errorf("requeue: %w", err)
	}
	return nil
}

// mustRoundTrip is roundTrip where every operation must succeed.
func (c *fdClients) mustRoundTrip(t *testing.T, b *limitedBroker, when string) {
	t.Helper()
	if err := c.roundTrip(when); err != nil {
		t.Fatalf("%s: %v\n%s", when, err, b.logTail())
	}
}

// checkAcknowledged reads the topic and drains the queue through new
// connections: every record and message the broker acknowledged to any
// of clients must be there.
func checkAcknowledged(t *testing.T, b *limitedBroker, clients ...*fdClients) {
	t.Helper()
	have := map[string]bool{}
	for _, v := range readTopic(t, b.kafka, fdTopic)[0] {
		have[v] = true
	}
	for _, d := range drainQueues(t, b.amqpURL(), []string{fdQueue})[fdQueue] {
		have["amqp "+d.body] = true
	}
	var records, messages int
	for _, c := range clients {
		for _, v := range c.produced {
			records++
			if !have[v] {
				t.Errorf("acknowledged record %q lost", v)
			}
		}
		for _, v := range c.confirmed {
			messages++
			if !have["amqp "+v] {
				t.Errorf("confirmed message %q lost", v)
			}
		}
	}
	t.Logf("checked %d acknowledged records and %d confirmed messages", records, messages)
}
