package mq

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/queuestore"
	"github.com/wharf-mq/wharf/internal/seglog"
)

func TestRestartKeepsPersistentMessagesOnly(t *testing.T) {
	e := newEnv(t)
	e.declareQueue("dq", true)
	e.declareQueue("tq", false)
	var want []string
	var last PublishResult
	for i := range 200 {
		body := fmt.Sprintf("m%03d", i)
		if i%2 == 0 {
			m := persistent("", "dq", body)
			m.Properties.ContentType = "text/plain"
			m.Properties.Headers = amqpwire.Table{"n": int32(i)}
			last = e.publish(m)
			want = append(want, body)
		} else {
			if res := e.publish(msg("", "dq", body)); res.Durable.Pending() {
				t.Fatal("transient message got a durable confirm")
			}
		}
	}
	e.publish(persistent("", "tq", "gone with its queue"))
	waitDurable(t, last)
	if e.messages("dq") != 200 {
		t.Fatalf("before restart %d messages", e.messages("dq"))
	}
	e.restart()

	if _, err := e.v.DeclareQueue(QueueDef{Name: "tq"}, true); err == nil {
		t.Error("non-durable queue survived a restart")
	}
	if n := e.messages("dq"); n != 100 {
		t.Fatalf("after restart %d messages, want 100", n)
	}
	var got []string
	for {
		d, ok, err := e.v.Get("dq", true, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		got = append(got, string(d.Message.Body))
		m := d.Message
		if m.Exchange != "" || m.RoutingKey != "dq" || m.Properties.DeliveryMode != 2 ||
			m.Properties.ContentType != "text/plain" || m.Properties.Headers["n"] == nil || d.Redelivered {
			t.Errorf("recovered message %s: %+v redelivered=%v", got[len(got)-1], m, d.Redelivered)
		}
		if len(m.RawProperties) == 0 {
			t.Error("recovered message without raw properties")
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("recovered %d messages\n got %v\nwant %v", len(got), got, want)
	}
}

func TestAckedMessagesDoNotComeBack(t *testing.T) {
	e := newEnv(t)
	e.declareQueue("q", true)
	for _, b := range bodies("m", 10) {
		e.publish(persistent("", "q", b))
	}
	c := newConsumer(6)
	sub := e.consume("q", c, false)
	ds := c.deliveries()
	// Ack m0, m2, m4; reject (discard) m1; leave m3, m5 unacked.
	e.v.Ack("q", ds[0].Tag, ds[2].Tag, ds[4].Tag)
	e.v.Discard("q", ds[1].Tag)
	// A no-ack get settles too.
	sub.Cancel()
	if d, _, _ := e.v.Get("q", true, 1); string(d.Message.Body) != "m6" {
		t.Fatalf("get %s", d.Message.Body)
	}
	e.restart()
	var got []string
	var redelivered []bool
	for {
		d, ok, _ := e.v.Get("q", true, 1)
		if !ok {
			break
		}
		got = append(got, string(d.Message.Body))
		redelivered = append(redelivered, d.Redelivered)
	}
	if want := []string{"m3", "m5", "m7", "m8", "m9"}; !slices.Equal(got, want) {
		t.Errorf("after restart %v, want %v", got, want)
	}
	// Clean shutdown: the ones delivered before are redelivered, the others not.
	if want := []bool{true, true, false, false, false}; !slices.Equal(redelivered, want) {
		t.Errorf("redelivered %v, want %v", redelivered, want)
	}
	e.restart()
	if n := e.messages("q"); n != 0 {
		t.Errorf("%d messages after the no-ack gets and a restart", n)
	}
}

func TestCrashRecoveryMarksRedelivered(t *testing.T) {
	e := newEnv(t)
	e.declareQueue("q", true)
	var last PublishResult
	for _, b := range bodies("m", 5) {
		last = e.publish(persistent("", "q", b))
	}
	waitDurable(t, last)
	d, _, _ := e.v.Get("q", false, 1)
	e.v.Ack("q", d.Tag)
	e.r.stores.HousekeepSoon() // the ack may or may not be written before the crash
	e.crash()
	got := e.drainDeliveries("q")
	if len(got) != 4 && len(got) != 5 {
		t.Fatalf("after crash %d messages", len(got))
	}
	for _, d := range got {
		if !d.Redelivered {
			t.Errorf("message %s after a crash not marked redelivered", d.Message.Body)
		}
	}
	if last := got[len(got)-1]; string(last.Message.Body) != "m4" {
		t.Errorf("last %s", last.Message.Body)
	}
}

func (e *env) drainDeliveries(queue string) []*Delivery {
	var out []*Delivery
	for {
		d, ok, err := e.v.Get(queue, true, 1)
		if err != nil {
			e.t.Fatal(err)
		}
		if !ok {
			return out
		}
		out = append(out, d)
	}
}

func TestConfirmAfterFsync(t *testing.T) {
	e := newEnv(t)
	e.declareQueue("q1", true)
	e.declareQueue("q2", true)
	e.declareQueue("t", false)
	e.bind("q1", "amq.fanout", "", nil)
	e.bind("q2", "amq.fanout", "", nil)
	e.bind("t", "amq.fanout", "", nil)
	q1, _ := e.v.lookupQueue("q1")
	q2, _ := e.v.lookupQueue("q2")
	for i := range 20 {
		res := e.publish(persistent("amq.fanout", "", fmt.Sprint(i)))
		if res.Routed != 3 {
			t.Fatalf("routed %d", res.Routed)
		}
		end1, end2 := q1.local().Extent().End, q2.local().Extent().End
		waitDurable(t, res)
		// The syncer's fsync covered the message in both durable queues.
		if q1.local().Extent().Synced < end1 || q2.local().Extent().Synced < end2 {
			t.Fatalf("confirm before fsync: synced %d/%d, appended up to %d/%d",
				q1.local().Extent().Synced, q2.local().Extent().Synced, end1, end2)
		}
	}
	// Transient to durable queues: no confirm channel.
	if res := e.publish(msg("amq.fanout", "", "t")); res.Durable.Pending() {
		t.Error("transient message has a durable confirm")
	}
	// And after a crash right after the confirm, the message is there.
	waitDurable(t, e.publish(persistent("", "q1", "confirmed")))
	e.crash()
	got := e.drain("q1")
	if len(got) == 0 || got[len(got)-1] != "confirmed" {
		t.Errorf("after crash q1 holds %v", got)
	}
}

// segmentFiles counts a log's .log segment files.
func segmentFiles(t *testing.T, dir string) int {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

func TestSegmentReclaim(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.SegmentBytes = 4 << 10 })
	e.declareQueue("q", true)
	q, _ := e.v.lookupQueue("q")
	body := strings.Repeat("x", 500)
	for range 100 {
		e.publish(persistent("", "q", body))
	}
	msgDir := filepath.Join(q.store.Dir(), queuestore.MessagesLog)
	before := segmentFiles(t, msgDir)
	if before < 10 {
		t.Fatalf("only %d segments; the test needs many", before)
	}
	c := newConsumer(-1)
	e.consume("q", c, false)
	ds := c.deliveries()
	// Ack the first half: segments wholly below the first unacked go.
	var tags []QueueTag
	for _, d := range ds[:50] {
		tags = append(tags, d.Tag)
	}
	e.v.Ack("q", tags...)
	if err := q.local().Housekeep(); err != nil {
		t.Fatal(err)
	}
	mid := segmentFiles(t, msgDir)
	if mid >= before || mid <= 1 {
		t.Errorf("after acking half: %d segments (was %d)", mid, before)
	}
	if start := q.local().Extent().Start; start != 50 {
		t.Errorf("messages log start %d, want 50", start)
	}
	tags = tags[:0]
	for _, d := range ds[50:] {
		tags = append(tags, d.Tag)
	}
	e.v.Ack("q", tags...)
	if err := q.local().Housekeep(); err != nil {
		t.Fatal(err)
	}
	if n := segmentFiles(t, msgDir); n != 1 {
		t.Errorf("after acking everything: %d segments, want 1 (the active one)", n)
	}
	e.restart()
	if n := e.messages("q"); n != 0 {
		t.Errorf("%d messages after restart", n)
	}
}

func TestPagingKeepsOrderAndBoundsMemory(t *testing.T) {
	const limit = 64 << 10
	e := newEnv(t, func(c *Config) { c.QueueMemoryBytes = limit })
	e.declareQueue("q", true)
	body := strings.Repeat("b", 1000)
	const n = 1000
	for i := range n {
		e.publish(persistent("", "q", fmt.Sprintf("%04d%s", i, body)))
	}
	if used := e.r.MemoryUsed(); used > limit+2000 {
		t.Errorf("MemoryUsed %d with a %d limit", used, limit)
	}
	// Transient messages interleaved stay in memory and keep their place.
	e.publish(msg("", "q", "transient"))
	c := newConsumer(-1)
	e.consume("q", c, false)
	got := c.deliveries()
	if len(got) != n+1 {
		t.Fatalf("%d deliveries", len(got))
	}
	for i, d := range got[:n] {
		if want := fmt.Sprintf("%04d", i); string(d.Message.Body[:4]) != want || len(d.Message.Body) != 1004 {
			t.Fatalf("delivery %d is %.8s... (%d bytes)", i, d.Message.Body, len(d.Message.Body))
		}
	}
	if string(got[n].Message.Body) != "transient" {
		t.Errorf("last delivery %s", got[n].Message.Body)
	}
	var tags []QueueTag
	for _, d := range got {
		tags = append(tags, d.Tag)
	}
	e.v.Ack("q", tags...)
	if used := e.r.MemoryUsed(); used != 0 {
		t.Errorf("MemoryUsed %d after acking everything", used)
	}
}

func TestRecoveredBacklogIsPagedIn(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.QueueMemoryBytes = 16 << 10 })
	e.declareQueue("q", true)
	for i := range 500 {
		e.publish(persistent("", "q", fmt.Sprintf("%03d-%s", i, strings.Repeat("z", 200))))
	}
	e.restart()
	if e.r.MemoryUsed() != 0 {
		t.Errorf("recovery loaded %d bytes of bodies eagerly", e.r.MemoryUsed())
	}
	c := newConsumer(10)
	sub := e.consume("q", c, false)
	if used := e.r.MemoryUsed(); used == 0 || used > 16<<10+1024 {
		t.Errorf("MemoryUsed %d after the first page-in", used)
	}
	n := 0
	for {
		ds := c.deliveries()
		for _, d := range ds[n:] {
			if want := fmt.Sprintf("%03d", n); string(d.Message.Body[:3]) != want {
				t.Fatalf("delivery %d is %.3s", n, d.Message.Body)
			}
			e.v.Ack("q", d.Tag)
			n++
		}
		if n == 500 {
			break
		}
		c.addCredit(10)
		sub.Resume()
	}
}

func TestDurableDefinitionsSurviveRestart(t *testing.T) {
	e := newEnv(t)
	v := e.v
	e.declareExchange("dx", "topic", true, amqpwire.Table{"alternate-exchange": "ae"})
	e.declareExchange("ae", "fanout", true, nil)
	e.declareExchange("tx", "direct", false, nil)
	e.declareQueue("dq", true)
	e.declareQueue("lost", true)
	e.declareQueue("tq", false)
	e.bind("dq", "dx", "a.#", nil)
	e.bind("lost", "ae", "", nil)
	e.bind("tq", "dx", "a.#", nil) // transient: queue is transient
	e.bind("dq", "tx", "k", nil)   // transient: exchange is transient
	if err := v.BindExchange("dx", "amq.topic", "x.*", nil); err != nil {
		t.Fatal(err)
	}
	if err := v.DeclareExchange(ExchangeDef{Name: "adx", Type: "headers", Durable: true, AutoDelete: true}, false); err != nil {
		t.Fatal(err)
	}
	e.bind("dq", "adx", "", amqpwire.Table{"x-match": "any", "k": int32(1)})
	e.restart()
	v = e.v

	if err := v.DeclareExchange(ExchangeDef{Name: "dx", Type: "topic", Durable: true, Args: amqpwire.Table{"alternate-exchange": "ae"}}, false); err != nil {
		t.Errorf("durable exchange not equivalent after restart: %v", err)
	}
	if err := v.DeclareExchange(ExchangeDef{Name: "tx"}, true); err == nil {
		t.Error("transient exchange survived")
	}
	var got []string
	for _, b := range v.Bindings() {
		got = append(got, fmt.Sprintf("%s->%s:%s", b.Source, b.Destination, b.Key))
	}
	want := []string{"adx->dq:", "ae->lost:", "amq.topic->dx:x.*", "dx->dq:a.#"}
	if !slices.Equal(got, want) {
		t.Errorf("bindings after restart %v, want %v", got, want)
	}
	// Routing works, alternate exchange included.
	wantRouted(t, e.routedTo(msg("amq.topic", "x.y", "1"), "dq", "lost"), "lost") // x.y does not match a.#
	wantRouted(t, e.routedTo(msg("dx", "a.b", "2"), "dq", "lost"), "dq")
	m := msg("adx", "", "3")
	m.Properties.Headers = amqpwire.Table{"k": int64(1)}
	wantRouted(t, e.routedTo(m, "dq", "lost"), "dq")

	// Deleting removes the definitions.
	if _, err := v.DeleteQueue("dq", false, false, 1); err != nil {
		t.Fatal(err)
	}
	for _, k := range e.defs.keys() {
		if strings.Contains(k, "/dq") {
			t.Errorf("definition %q left after deleting dq", k)
		}
	}
	// adx lost its only binding with dq: auto-deleted, also from the store.
	if err := v.DeclareExchange(ExchangeDef{Name: "adx"}, true); err == nil {
		t.Error("auto-delete exchange survived losing its last binding")
	}
	e.restart()
	if err := e.v.DeclareExchange(ExchangeDef{Name: "adx"}, true); err == nil {
		t.Error("auto-delete exchange came back after restart")
	}
}

func TestQueueFilesRemovedOnDelete(t *testing.T) {
	e := newEnv(t)
	e.declareQueue("q", true)
	q, _ := e.v.lookupQueue("q")
	e.publish(persistent("", "q", "x"))
	if _, err := os.Stat(q.store.Dir()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.v.DeleteQueue("q", false, false, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(q.store.Dir()); !os.IsNotExist(err) {
		t.Errorf("queue directory still there: %v", err)
	}
	e.restart()
	// Redeclared: a fresh, empty queue.
	e.declareQueue("q", true)
	if e.messages("q") != 0 {
		t.Error("redeclared durable queue not empty")
	}
}

// Queue data whose definition is missing (a definition store that lost its
// tail) is set aside at Open, never deleted, and left alone afterwards.
func TestQueueDataWithoutDefinitionSetAside(t *testing.T) {
	e := newEnv(t)
	e.declareQueue("q", true)
	var last PublishResult
	for i := range 5 {
		last = e.publish(persistent("", "q", fmt.Sprint(i)))
	}
	waitDurable(t, last)
	id := e.queueNamed("q").id
	if err := e.r.Close(); err != nil {
		t.Fatal(err)
	}
	e.defs = newMemDefs() // the definitions are lost
	e.cfg.Definitions = e.defs
	for range 2 {
		e.open()
		if _, err := e.v.DeclareQueue(QueueDef{Name: "q"}, true); err == nil {
			t.Fatal("queue q exists without its definition")
		}
		if err := e.r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	queues := filepath.Join(e.dir, queuesDirName)
	stray, err := filepath.Glob(filepath.Join(queues, id+".*-stray"))
	if err != nil || len(stray) != 1 {
		t.Fatalf("set-aside directories of %s: %v (%v)", id, stray, err)
	}
	if _, err := os.Stat(filepath.Join(queues, id)); !os.IsNotExist(err) {
		t.Fatalf("queue directory still in place: %v", err)
	}
	l, err := seglog.Open(filepath.Join(stray[0], queuestore.MessagesLog), seglog.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if end := l.EndOffset(); end != 5 {
		t.Fatalf("the set-aside messages log holds %d messages, want 5", end)
	}
	e.open()
}
