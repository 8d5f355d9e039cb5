package mq

import (
	"fmt"
	"maps"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/seglog"
)

// fakeStreams is a StreamStore over plain seglog logs in a directory: what
// the broker's topics are, without the broker. Logs stay open across a
// registry restart, as the broker's would.
type fakeStreams struct {
	dir string

	mu      sync.Mutex
	streams map[string]*fakeStream
	configs map[string]map[string]string // topic configs each stream was created with
	deleted []string
}

func newFakeStreams(t *testing.T) *fakeStreams {
	f := &fakeStreams{dir: t.TempDir(), streams: make(map[string]*fakeStream), configs: make(map[string]map[string]string)}
	t.Cleanup(func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, s := range f.streams {
			s.log.Close()
		}
	})
	return f
}

func (f *fakeStreams) CreateStream(name string, cfg StreamConfig) (Stream, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := f.streams[name]; s != nil {
		return s, nil
	}
	sc := seglog.DefaultConfig()
	sc.RetentionMs, sc.RetentionBytes = -1, -1
	l, err := seglog.Open(filepath.Join(f.dir, fmt.Sprintf("%s-%d", name, len(f.deleted))), sc, nil)
	if err != nil {
		return nil, err
	}
	s := &fakeStream{log: l, waiters: make(map[chan<- struct{}]struct{})}
	f.streams[name] = s
	f.configs[name] = cfg.TopicConfigs()
	return s, nil
}

func (f *fakeStreams) OpenStream(name string) (Stream, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := f.streams[name]; s != nil {
		return s, nil
	}
	return nil, fmt.Errorf("%w: %s", ErrStreamNotFound, name)
}

func (f *fakeStreams) DeleteStream(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.streams[name]
	if s == nil {
		return nil
	}
	delete(f.streams, name)
	f.deleted = append(f.deleted, name)
	return s.log.Delete()
}

func (f *fakeStreams) stream(name string) *fakeStream {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.streams[name]
}

func (f *fakeStreams) config(name string) map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.configs[name])
}

type fakeStream struct {
	log *seglog.Log
	// maxBatch, if set, is the largest batch Append takes, as a topic's
	// max.message.bytes is; set it before publishing.
	maxBatch int
	appends  atomic.Int64 // Appends that succeeded
	synced   atomic.Int64 // the end offset the last Sync covered
	// syncGate, if set (before publishing), holds every Sync until it
	// is closed.
	syncGate chan struct{}

	mu      sync.Mutex
	waiters map[chan<- struct{}]struct{}
}

func (s *fakeStream) Append(batch []byte) (int64, error) {
	if s.maxBatch > 0 && len(batch) > s.maxBatch {
		return 0, fmt.Errorf("batch of %d bytes, limit %d", len(batch), s.maxBatch)
	}
	res, err := s.log.Append(batch, seglog.AppendOptions{})
	if err == nil {
		s.appends.Add(1)
	}
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	for ch := range s.waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	clear(s.waiters)
	s.mu.Unlock()
	return res.BaseOffset, nil
}

// Sync fails on a closed log, as StreamStore's contract has it. With
// syncGate set it first waits for the gate to open (close it).
func (s *fakeStream) Sync() error {
	if s.syncGate != nil {
		<-s.syncGate
	}
	end := s.log.EndOffset()
	if err := s.log.Sync(); err != nil {
		return err
	}
	for {
		cur := s.synced.Load()
		if cur >= end || s.synced.CompareAndSwap(cur, end) {
			return nil
		}
	}
}

func (s *fakeStream) Read(offset, maxBytes int64) (*seglog.Slice, error) {
	return s.log.Read(offset, maxBytes)
}

func (s *fakeStream) StartOffset() int64 { return s.log.StartOffset() }
func (s *fakeStream) EndOffset() int64   { return s.log.EndOffset() }

func (s *fakeStream) OffsetForTime(ts int64) (int64, bool, error) {
	off, _, found, err := s.log.OffsetForTime(ts)
	return off, found, err
}

func (s *fakeStream) Notify(ch chan<- struct{}) {
	s.mu.Lock()
	s.waiters[ch] = struct{}{}
	s.mu.Unlock()
}

func (s *fakeStream) Unnotify(ch chan<- struct{}) {
	s.mu.Lock()
	delete(s.waiters, ch)
	s.mu.Unlock()
}

// newStreamEnv is an env whose registry has stream queues over fakeStreams.
func newStreamEnv(t *testing.T, tweak ...func(*Config)) (*env, *fakeStreams) {
	fs := newFakeStreams(t)
	tweak = append([]func(*Config){func(c *Config) { c.Streams = fs }}, tweak...)
	return newEnv(t, tweak...), fs
}

func streamArgs(extra amqpwire.Table) amqpwire.Table {
	args := amqpwire.Table{"x-queue-type": "stream"}
	maps.Copy(args, extra)
	return args
}

func (e *env) declareStream(name string, extra amqpwire.Table) {
	e.t.Helper()
	e.declareQueueArgs(name, true, streamArgs(extra))
}

// streamConsumer takes deliveries while it has credit and hands them to the
// test on a channel (buffered: TryDeliver must not block).
type streamConsumer struct {
	mu     sync.Mutex
	credit int
	ch     chan *Delivery
}

func newStreamConsumer(credit int) *streamConsumer {
	return &streamConsumer{credit: credit, ch: make(chan *Delivery, 1000)}
}

func (c *streamConsumer) TryDeliver(d *Delivery) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.credit == 0 {
		return false
	}
	c.credit--
	c.ch <- d
	return true
}

func (c *streamConsumer) addCredit(n int) {
	c.mu.Lock()
	c.credit += n
	c.mu.Unlock()
}

// consumeStream subscribes c to a stream queue from offset spec (nil: the
// default) with a consumer prefetch, and resumes it.
func (e *env) consumeStream(queue string, c *streamConsumer, offset any) *Subscription {
	e.t.Helper()
	var args amqpwire.Table
	if offset != nil {
		args = amqpwire.Table{StreamOffsetHeader: offset}
	}
	sub, err := e.v.Consume(queue, ConsumeSpec{Tag: fmt.Sprintf("ctag-%p", c), Conn: 1, Consumer: c, Args: args, Prefetch: 100})
	if err != nil {
		e.t.Fatalf("Consume(%s, %v): %v", queue, offset, err)
	}
	sub.Resume()
	return sub
}

// next waits for c's next delivery.
func (c *streamConsumer) next(t *testing.T) *Delivery {
	t.Helper()
	select {
	case d := <-c.ch:
		return d
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery within 10 s")
		return nil
	}
}

// expect waits for deliveries with these bodies at these offsets.
func (c *streamConsumer) expect(t *testing.T, bodies []string, firstOffset int64) {
	t.Helper()
	for i, want := range bodies {
		d := c.next(t)
		if got := string(d.Message.Body); got != want {
			t.Fatalf("delivery %d: body %q, want %q", i, got, want)
		}
		if got := d.Message.Properties.Headers[StreamOffsetHeader]; got != firstOffset+int64(i) {
			t.Fatalf("delivery %d (%q): x-stream-offset %v (%T), want %d", i, want, got, got, firstOffset+int64(i))
		}
	}
}

// expectNone checks that nothing more was delivered. Deliveries are
// asynchronous, so this is only meaningful after a later delivery (or a
// barrier) proved the reader went past.
func (c *streamConsumer) expectNone(t *testing.T) {
	t.Helper()
	select {
	case d := <-c.ch:
		t.Fatalf("unexpected delivery %q", d.Message.Body)
	default:
	}
}

func (e *env) publishBodies(exchange, key string, bodies ...string) {
	e.t.Helper()
	for _, b := range bodies {
		e.publish(msg(exchange, key, b))
	}
}
