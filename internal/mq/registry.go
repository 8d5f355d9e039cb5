package mq

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/seglog"
)

// DefinitionStore keeps durable definitions (vhosts, exchanges, queues,
// bindings). The broker backs it with its metadata log.
type DefinitionStore interface {
	// Put stores value under key; it is durable when Put returns.
	Put(key string, value []byte) error
	// Delete removes key; it is durable when Delete returns.
	Delete(key string) error
	// Load calls fn for every live key (at Open).
	Load(fn func(key string, value []byte) error) error
}

// Config configures a Registry. Zero values take the defaults.
type Config struct {
	// DataDir holds durable queues' logs, in DataDir/queues/<id>/.
	DataDir string
	// Definitions keeps durable definitions. Required.
	Definitions DefinitionStore
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// SegmentBytes is the segment size of queue logs; a segment is deleted
	// once every message in it is settled. Default 16 MiB.
	SegmentBytes int64
	// QueueMemoryBytes is how many bytes of persistent message bodies a
	// durable queue keeps in memory; bodies beyond it stay on disk and are
	// read back when they near the head. Transient messages are always in
	// memory. Default 4 MiB.
	QueueMemoryBytes int64
	// HousekeepingInterval is how often settlements are written to the
	// settlement logs and settled segments reclaimed. Default 250 ms.
	HousekeepingInterval time.Duration
	// ConsumerTimeout is RabbitMQ's consumer_timeout: how long a delivery
	// may stay unacknowledged before its consumer is told (see
	// TimeoutNotifier). A queue's x-consumer-timeout overrides it.
	// Default 30 minutes; negative disables it.
	ConsumerTimeout time.Duration
	// ScrubInterval is how often every durable queue's logs are read
	// back and verified in full (scrub.go). 0, the default, scrubs only
	// once after Open, and only what the logs' recovery did not verify;
	// negative never scrubs. A damaged log crashes its queue. The broker
	// passes its own setting (--scrub-interval).
	ScrubInterval time.Duration
	// ScrubBytesPerSecond caps the scrubber's reads; default 200 MB/s,
	// negative for no cap.
	ScrubBytesPerSecond int64
	// Streams gives stream queues (x-queue-type stream) their logs,
	// Kafka topics; the broker provides it. Without it declaring a stream
	// queue is refused (406) and stream queues in the definitions are
	// left out at Open.
	Streams StreamStore

	// clock replaces time.Now in tests; with manualTimers no goroutine
	// runs the timers: the test calls timers.fire.
	clock        func() time.Time
	manualTimers bool
}

func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.SegmentBytes <= 0 {
		c.SegmentBytes = 16 << 20
	}
	if c.QueueMemoryBytes <= 0 {
		c.QueueMemoryBytes = 4 << 20
	}
	if c.HousekeepingInterval <= 0 {
		c.HousekeepingInterval = 250 * time.Millisecond
	}
	if c.ConsumerTimeout == 0 {
		c.ConsumerTimeout = 30 * time.Minute
	}
	if c.ScrubBytesPerSecond == 0 {
		c.ScrubBytesPerSecond = 200 << 20
	}
	if c.clock == nil {
		c.clock = time.Now
	}
}

// segConfig is the seglog configuration of queue logs: no time- or
// size-based retention (messages go when they are settled).
func (c *Config) segConfig() seglog.Config {
	sc := seglog.DefaultConfig()
	sc.SegmentBytes = c.SegmentBytes
	sc.RetentionMs = -1
	sc.RetentionBytes = -1
	return sc
}

// Registry is the message-queuing core of one broker: its virtual hosts and
// everything in them, and the goroutine that fsyncs queue logs for
// publisher confirms.
type Registry struct {
	cfg    Config
	logger *slog.Logger
	defs   DefinitionStore

	mu     sync.RWMutex
	vhosts map[string]*VHost
	closed atomic.Bool

	storesMu  sync.Mutex
	stores    map[*queueStore]struct{} // open durable queue stores, for housekeeping
	queuesDir *dirSync                 // DataDir/queues

	mem        atomic.Int64  // bytes of message bodies held in memory
	nextTag    atomic.Uint64 // last QueueTag handed out
	bindingSeq atomic.Uint64 // last bindingRecord.Seq handed out

	syncer *syncer
	keeper *housekeeper
	timers *timers
	scrub  *scrubber

	// Stream queues: which queue owns which topic, and the consumers'
	// reader goroutines (stopped by streamStop at Close).
	streamMu      sync.Mutex
	streamOwners  map[string]string // topic -> owning queue, as resource() prints it
	streamsClosed bool
	streamStop    chan struct{}
	streamReaders sync.WaitGroup
}

// DefaultVHost is the virtual host every registry starts with.
const DefaultVHost = "/"

// Open loads the definitions, opens every durable queue and recovers its
// unsettled persistent messages, and starts the syncer. A new store gets
// the vhost "/".
func Open(cfg Config) (*Registry, error) {
	if cfg.Definitions == nil {
		return nil, errors.New("mq: Config.Definitions is required")
	}
	if cfg.DataDir == "" {
		return nil, errors.New("mq: Config.DataDir is required")
	}
	cfg.setDefaults()
	r := &Registry{
		cfg:    cfg,
		logger: cfg.Logger,
		defs:   cfg.Definitions,
		vhosts: make(map[string]*VHost),
		stores: make(map[*queueStore]struct{}),

		streamOwners: make(map[string]string),
		streamStop:   make(chan struct{}),
	}
	queuesDir, err := openDirSync(filepath.Join(cfg.DataDir, queuesDirName))
	if err != nil {
		return nil, fmt.Errorf("mq: %w", err)
	}
	r.queuesDir = queuesDir
	r.timers = newTimers(r) // queues arm timers while they load
	if err := r.load(); err != nil {
		r.closeStores()
		return nil, err
	}
	r.syncer = newSyncer(r)
	r.keeper = newHousekeeper(r, cfg.HousekeepingInterval)
	go r.syncer.run()
	go r.keeper.run()
	r.scrub = r.startScrubber()
	if cfg.manualTimers {
		close(r.timers.done)
	} else {
		go r.timers.run()
	}
	return r, nil
}

// Close stops the background goroutines (completing waiting confirms),
// writes pending settlements and closes every queue log. Consumers are not notified: the
// front end closes its connections first.
func (r *Registry) Close() error {
	if r.closed.Swap(true) {
		return nil
	}
	r.scrub.stop()
	r.stopStreamReaders()
	r.timers.shutdown()
	r.syncer.shutdown()
	r.keeper.shutdown()
	return r.closeStores()
}

// nowMs is the registry's clock in unix milliseconds.
func (r *Registry) nowMs() int64 { return r.cfg.clock().UnixMilli() }

// durableQueues returns the queues of every vhost that have a store.
func (r *Registry) durableQueues() []*queue {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var qs []*queue
	for _, v := range r.vhosts {
		v.mu.RLock()
		for _, q := range v.queues {
			if q.store != nil {
				qs = append(qs, q)
			}
		}
		v.mu.RUnlock()
	}
	return qs
}

// storeClosers is how many queue stores close at once. Each close costs a
// few fsyncs (the logs' markers, the clean marker); one after another,
// 2,000 queues on a busy disk took longer than a supervisor's stop timeout.
// The broker closes partitions eight at a time for the same reason.
const storeClosers = 8

func (r *Registry) closeStores() error {
	qs := r.durableQueues()
	errs := make([]error, len(qs))
	slots := make(chan struct{}, storeClosers)
	var wg sync.WaitGroup
	for i, q := range qs {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			if err := q.store.close(); err != nil {
				errs[i] = fmt.Errorf("close queue %q: %w", q.name, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// MemoryUsed returns the bytes of message bodies held in memory by all
// queues (a body routed to several queues counts once). The front end
// blocks publishers above its high-water mark.
func (r *Registry) MemoryUsed() int64 { return r.mem.Load() }

// VHost returns the named virtual host, or a 530 NOT_ALLOWED *Error
// ("vhost x not found", as RabbitMQ answers connection.open).
func (r *Registry) VHost(name string) (*VHost, error) {
	r.mu.RLock()
	v := r.vhosts[name]
	r.mu.RUnlock()
	if v == nil {
		return nil, errNoVHost(name)
	}
	return v, nil
}

// errNoVHost is RabbitMQ's answer to connection.open for an unknown vhost:
// 530 NOT_ALLOWED, a connection error (also what operations on a vhost
// deleted meanwhile get).
func errNoVHost(name string) *Error {
	return amqpwire.Errorf(amqpwire.CodeNotAllowed, "vhost %s not found", name)
}

// VHosts returns the names of all virtual hosts, sorted.
func (r *Registry) VHosts() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.vhosts))
	for n := range r.vhosts {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// AddVHost creates a virtual host (durably) with the predeclared exchanges,
// or returns the existing one.
func (r *Registry) AddVHost(name string) (*VHost, error) {
	if r.closed.Load() {
		return nil, ErrClosed
	}
	if err := checkUTF8(name); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if v := r.vhosts[name]; v != nil {
		return v, nil
	}
	if err := r.defs.Put(vhostKey(name), mustJSON(vhostRecord{Name: name})); err != nil {
		return nil, errInternal("store vhost", err)
	}
	v := newVHost(r, name)
	r.vhosts[name] = v
	return v, nil
}

// DeleteVHost deletes a virtual host and everything in it; consumers of its
// queues get their Cancelled callback.
func (r *Registry) DeleteVHost(name string) error {
	r.mu.Lock()
	v := r.vhosts[name]
	if v == nil {
		r.mu.Unlock()
		return errNoVHost(name)
	}
	delete(r.vhosts, name)
	r.mu.Unlock()
	return v.destroy()
}

func (r *Registry) newTag() QueueTag { return QueueTag(r.nextTag.Add(1)) }

func (r *Registry) addStore(s *queueStore) {
	r.storesMu.Lock()
	r.stores[s] = struct{}{}
	r.storesMu.Unlock()
}

func (r *Registry) removeStore(s *queueStore) {
	r.storesMu.Lock()
	delete(r.stores, s)
	r.storesMu.Unlock()
}

func (r *Registry) openStores() []*queueStore {
	r.storesMu.Lock()
	defer r.storesMu.Unlock()
	out := make([]*queueStore, 0, len(r.stores))
	for s := range r.stores {
		out = append(out, s)
	}
	return out
}

// straySuffix ends the name of a queue directory moved aside by
// setAsideOrphanStores; no store ID ends with it.
const straySuffix = "-stray"

// setAsideOrphanStores moves queue directories that belong to no durable
// queue out of the way, renamed <id>.<unix ms>-stray, and never deletes
// them: a definition store that lost its tail (a damaged or truncated
// metadata log) must not cost the data too. Kafka does the same with
// partition directories it has no metadata for. Such a directory is also
// what a crash between deleting a queue's definition and its files leaves;
// an operator removes it once satisfied it is not needed. Directories set
// aside before are only counted in the log.
func (r *Registry) setAsideOrphanStores(live map[string]bool) {
	root := r.queuesDir.path
	entries, err := os.ReadDir(root)
	if err != nil {
		r.logger.Error("mq: cannot list queue data", "dir", root, "err", err)
		return
	}
	moved, earlier := 0, 0
	for _, e := range entries {
		switch {
		case !e.IsDir() || live[e.Name()]:
		case strings.HasSuffix(e.Name(), straySuffix):
			earlier++
		default:
			from := filepath.Join(root, e.Name())
			to := fmt.Sprintf("%s.%d%s", from, r.cfg.clock().UnixMilli(), straySuffix)
			if err := os.Rename(from, to); err != nil {
				r.logger.Error("mq: cannot set aside queue data without a queue definition", "dir", from, "err", err)
				continue
			}
			moved++
			r.logger.Error("mq: queue data without a queue definition set aside, not deleted "+
				"(were the definitions lost?); remove it once it is known not to be needed",
				"dir", from, "moved_to", to)
		}
	}
	if moved > 0 {
		if err := syncDir(root); err != nil {
			r.logger.Error("mq: sync queue data directory", "dir", root, "err", err)
		}
	}
	if earlier > 0 {
		r.logger.Warn("mq: queue data set aside at an earlier start is still there", "dirs", earlier, "in", root)
	}
}
