package mq

import (
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/queuestore"
	"github.com/wharf-mq/wharf/internal/replica"
)

// DefinitionStore keeps durable definitions (vhosts, exchanges, queues,
// bindings). The node backs it with the Kafka core's metadata log
// (broker.DefinitionStore).
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
	// back and verified in full (queuestore's scrubber). 0, the default,
	// scrubs only once after Open, and only what the logs' recovery did
	// not verify; negative never scrubs. A damaged log crashes its
	// queue. The node passes the broker's setting (--scrub-interval).
	ScrubInterval time.Duration
	// ScrubBytesPerSecond caps the scrubber's reads; default 200 MB/s,
	// negative for no cap.
	ScrubBytesPerSecond int64
	// Streams gives stream queues (x-queue-type stream) their logs,
	// Kafka topics; the node provides it (internal/streambridge).
	// Without it declaring a stream queue is refused (406) and stream
	// queues in the definitions are left out at Open.
	Streams StreamStore
	// Cluster makes the registry one node of a cluster (cluster.go); nil:
	// a single node.
	Cluster *ClusterConfig

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

// Registry is the message-queuing core of one broker: its virtual hosts and
// everything in them, the durable queues' stores, and the goroutine that
// fsyncs queue logs for publisher confirms.
type Registry struct {
	cfg    Config
	logger *slog.Logger
	defs   DefinitionStore

	mu     sync.RWMutex
	vhosts map[string]*VHost
	// vhostDefMu is held by AddVHost and DeleteVHost from before they
	// change a vhost's record to after they changed vhosts (a delete's
	// takes until its vhost is destroyed), and by the follower from
	// before it reads a vhost's record to after it applied it
	// (followVHost): the vhost defMu is to the definitions in a vhost.
	vhostDefMu sync.Mutex
	closed     atomic.Bool

	stores *queuestore.Root // DataDir/queues: the durable queues' stores

	mem        atomic.Int64  // bytes of message bodies held in memory
	nextTag    atomic.Uint64 // last QueueTag handed out
	bindingSeq atomic.Uint64 // last bindingRecord.Seq handed out

	syncer *replica.Syncer // publisher confirms (group commit)
	timers *timers
	// follower applies the definitions other nodes write (cluster.go);
	// nil on a single node.
	follower *follower
	stale    staleQueues // this node's exclusive queues from before it started (exclusive_cluster.go)
	// removals are the nodes whose removal this node carried out and
	// waits for to apply (exclusive_cluster.go).
	removals removals
	// membersApplied wakes the callers waiting for quorum queue
	// membership changes (quorum_members.go).
	membersApplied signal

	// Stream queues: which queue owns which topic, and the consumers'
	// reader goroutines (stopped by streamStop at Close).
	streamMu      sync.Mutex
	streamOwners  map[string]string // topic -> owning queue, as resource() prints it
	streamsClosed bool
	streamStop    chan struct{}
	streamReaders sync.WaitGroup

	// quorumReplicas are this node's replicas of quorum queues in a
	// cluster (quorum_cluster.go), closed at Close.
	quorumMu       sync.Mutex
	quorumReplicas map[*quorumReplica]struct{}
	// proxies ends the sessions of quorum queues led elsewhere at Close.
	proxies proxies
	// replyForwards are direct reply-to replies on their way to other
	// nodes (replyto_cluster.go), sent on goroutines proxies ends.
	replyForwards replyForwards
	// clients tells other nodes of this node's clients, and closes their
	// connections for them (clients_cluster.go); nil until the AMQP front
	// end is up.
	clients atomic.Pointer[Clients]
}

// DefaultVHost is the virtual host every registry starts with.
const DefaultVHost = "/"

// Open loads the definitions, opens every durable queue and recovers its
// unsettled persistent messages, and starts the syncer and the stores'
// background work. A new definition store gets the vhost "/".
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

		streamOwners:   make(map[string]string),
		streamStop:     make(chan struct{}),
		quorumReplicas: make(map[*quorumReplica]struct{}),
		proxies:        newProxies(),
	}
	stores, err := queuestore.OpenRoot(queuestore.Config{
		Dir:                  filepath.Join(cfg.DataDir, queuesDirName),
		SegmentBytes:         cfg.SegmentBytes,
		HousekeepingInterval: cfg.HousekeepingInterval,
		ScrubInterval:        cfg.ScrubInterval,
		ScrubBytesPerSecond:  cfg.ScrubBytesPerSecond,
		Logger:               cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	r.stores = stores
	r.timers = newTimers(r) // queues arm timers while they load
	if cfg.Cluster != nil {
		// Before load: what is applied meanwhile is followed after it.
		r.follower = newFollower()
		cfg.Cluster.Watch(r.follower.add)
	}
	if err := r.load(); err != nil {
		if cfg.Cluster != nil {
			cfg.Cluster.Watch(nil)
		}
		r.closeQuorumReplicas()
		r.stores.Close()
		return nil, err
	}
	if r.follower != nil {
		go r.follow()
	}
	r.syncer = replica.StartSyncer()
	r.stores.Start()
	if cfg.manualTimers {
		close(r.timers.done)
	} else {
		go r.timers.run()
	}
	if cfg.Cluster != nil && cfg.Cluster.HandleCalls != nil {
		cfg.Cluster.HandleCalls(r.answerCall) // other nodes reach this node's classic queues
	}
	return r, nil
}

// Close stops the background goroutines (completing waiting confirms),
// writes pending settlements and closes every queue log. Consumers are not
// notified: the front end closes its connections first.
func (r *Registry) Close() error {
	if r.closed.Swap(true) {
		return nil
	}
	if c := r.cfg.Cluster; c != nil && c.HandleCalls != nil {
		c.HandleCalls(nil)
		r.endClassicSessions()
	}
	r.stopFollowing()
	r.stopStreamReaders()
	r.timers.shutdown()
	r.syncer.Shutdown()
	r.proxies.stop()
	r.closeQuorumReplicas()
	return r.stores.Close()
}

// queuesDirName is the directory in DataDir that holds the durable
// queues' stores, one directory each (internal/queuestore).
const queuesDirName = "queues"

// StoredQueues counts the durable queues that have data in dataDir, and
// names the directory holding it. The node asks at start-up: queue logs
// with no metadata log to define their queues mean the definitions were
// lost, not that the queues are gone.
func StoredQueues(dataDir string) (n int, dir string, err error) {
	dir = filepath.Join(dataDir, queuesDirName)
	n, err = queuestore.Stored(dir)
	return n, dir, err
}

// nodeID is this node's id in a cluster, 0 on a single node.
func (r *Registry) nodeID() int32 {
	if r.cfg.Cluster == nil {
		return 0
	}
	return r.cfg.Cluster.NodeID
}

// nowMs is the registry's clock in unix milliseconds.
func (r *Registry) nowMs() int64 { return r.cfg.clock().UnixMilli() }

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
	r.vhostDefMu.Lock()
	defer r.vhostDefMu.Unlock()
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
	r.vhostDefMu.Lock()
	defer r.vhostDefMu.Unlock()
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
