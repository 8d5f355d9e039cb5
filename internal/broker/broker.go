// Package broker is Wharf's Kafka core: topics made of partitions, each
// partition a log behind the log seam (internal/replica), plus the
// broker's own metadata, itself kept in a log (which also holds the
// definition store of the queueing core, internal/mq). The Kafka front
// end (internal/kafka) and the coordinators (internal/group, internal/txn)
// translate requests into calls on this package and hold no storage logic
// of their own. It does not know the queueing core: internal/node opens
// both side by side and installs the rules between them as hooks
// (Config.TopicInUse, Config.QueueData).
package broker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wharf-mq/wharf/internal/replica"
)

// Broker owns every topic and the goroutines that flush, trim, compact and
// scrub their logs.
type Broker struct {
	cfg       Config
	logger    *slog.Logger
	clusterID string
	meta      *metadataLog
	defs      *DefinitionStore

	adminMu sync.Mutex // serialises topic creation, deletion and alteration
	// deletedTopics are the IDs of topics whose deletion the metadata log
	// records: the only ones whose leftover data may be removed (dirs.go).
	// Written under mu (in a cluster it is state.deletedTopics, which the
	// apply loop changes) and read under mu (topicDeleted).
	deletedTopics map[[16]byte]bool

	openSlots chan struct{} // bounds partitions being opened or closed at once (partition_open.go)

	// replaceMu serialises replacing a partition by one opened anew here
	// (reassign.go): the reassignment driver and a reassignment's applied
	// end may both find the same partition, and one replica directory is
	// opened once.
	replaceMu sync.Mutex

	producerIDMu       sync.Mutex
	nextProducerID     int64 // guarded by producerIDMu
	producerIDBlockEnd int64 // guarded by producerIDMu

	mu     sync.RWMutex
	topics map[string]*Topic
	byID   map[[16]byte]*Topic
	// byCollisionName finds a topic by its name with '.' read as '_'
	// (collisionName): Kafka refuses a new topic that differs from an
	// existing one only there.
	byCollisionName map[string]*Topic
	closed          bool

	// In a cluster: the metadata as applied so far, the offset its apply
	// loop reached, and a channel closed when it moves on (cluster.go);
	// the count of the metadata replica's snapshot installs the state was
	// replayed at (replica.RaftLog.Installs); guarded by mu.
	state        metadataState
	appliedEnd   int64
	applyChanged chan struct{}
	installsSeen uint64
	// stopCluster ends metadata writes and the apply loop; its cause is
	// what writes fail with from then on (ErrClosed, or this node's
	// removal: fenceOutOfGroup).
	stopCluster context.CancelCauseFunc

	// callHandlers answer calls to partitions, by topic name:
	// PartitionCallHandler (calls.go).
	callHandlers sync.Map
	// nodeCallHandlers answer calls to this node, by service (calls.go).
	nodeCallHandlers sync.Map

	// leadersWake wakes the leadership loop; leadersChanged is closed and
	// replaced by it at every change (leadership.go).
	leadersWake    chan struct{}
	leadersMu      sync.Mutex
	leadersChanged chan struct{}

	// removed is closed when this node applies its own removal from
	// the cluster (membership.go).
	removed     chan struct{}
	removedOnce sync.Once

	// registration is what Register records (nil before it is
	// called), and shutdownBegun is set by BeginControlledShutdown;
	// regMu orders the registration's write and the shutdown's mark
	// (shutdown.go).
	regMu         sync.Mutex
	registration  *BrokerInfo // guarded by regMu
	shutdownBegun atomic.Bool

	markerHook  atomic.Pointer[TxnMarkerHook]   // OnTxnMarker
	removalHook atomic.Pointer[NodeRemovalHook] // OnRemoveNode

	// flusher fsyncs the partitions' logs in the background, every
	// FlushInterval and ahead of it.
	flusher *replica.Flusher

	stop chan struct{}
	bg   sync.WaitGroup
}

// Open starts a broker on cfg.DataDir: it replays the metadata log and
// opens every partition. It takes no lock on the directory: the node does
// (one process per data directory). A partition whose log is corrupt, or
// whose directory or files cannot be opened, is kept offline and
// reported, as Kafka does with a failed log directory, rather than failing
// the whole broker. It refuses to start on data whose metadata log is
// missing or cut short (see refuseDataWithoutMetadata), and deletes no
// data the metadata log does not record as deleted (dirs.go).
func Open(cfg Config) (*Broker, error) {
	cfg = cfg.withDefaults()
	if cfg.DataDir == "" {
		return nil, errors.New("broker: no data directory")
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, err
	}
	if cfg.Cluster != nil {
		if err := refuseRemoved(cfg.DataDir, cfg.NodeID); err != nil {
			return nil, err
		}
	}
	meta, err := openMetadataLog(cfg.DataDir, cfg.NodeID, cfg.Cluster, cfg.MetadataLogSegmentBytes, cfg.Logger)
	if errors.Is(err, ErrNodeRemoved) {
		// The other nodes say so: written down, as an applied removal
		// is, so that the node refuses at once from now on.
		if werr := writeRemovedMarker(cfg.DataDir, cfg.NodeID); werr != nil {
			cfg.Logger.Error("recording this node's removal in its data directory failed", "err", werr)
		}
	}
	if err != nil {
		return nil, err
	}
	if err := refuseDataWithoutMetadata(cfg.DataDir, meta, cfg.QueueData); err != nil {
		meta.close()
		return nil, err
	}
	b := &Broker{
		cfg:             cfg,
		logger:          cfg.Logger,
		meta:            meta,
		topics:          map[string]*Topic{},
		byID:            map[[16]byte]*Topic{},
		byCollisionName: map[string]*Topic{},

		leadersWake:    make(chan struct{}, 1),
		leadersChanged: make(chan struct{}),
		removed:        make(chan struct{}),

		openSlots: make(chan struct{}, partitionOpeners),
		flusher:   replica.StartFlusher(cfg.FlushInterval),
		stop:      make(chan struct{}),
	}
	if err := b.load(); err != nil {
		b.flusher.Stop()
		b.closeLogs()
		return nil, err
	}
	if cfg.Cluster != nil {
		b.startApplying()
	}
	b.bg.Add(1)
	go b.retentionLoop()
	b.startCleaner()  // log compaction; joins b.bg and stops on b.stop
	b.startScrubber() // CRC check of what recovery trusted; likewise
	return b, nil
}

func (b *Broker) load() error {
	if b.meta.raft != nil {
		// An install during the replay makes the apply loop replay again.
		b.installsSeen = b.meta.raft.Installs()
	}
	st, err := b.meta.load()
	if err != nil {
		return fmt.Errorf("replay metadata log: %w", err)
	}
	// A copy: in a cluster the apply loop changes st.definitions under b.mu,
	// and the store's live map under its own lock.
	b.defs = &DefinitionStore{meta: b.meta, logger: b.logger, live: maps.Clone(st.definitions)}
	b.clusterID = st.clusterID
	b.nextProducerID, b.producerIDBlockEnd = st.producerIDBlockEnd, st.producerIDBlockEnd
	if b.cfg.Cluster != nil {
		if st.nodes[b.cfg.NodeID].Removed {
			return removedError(b.cfg.NodeID)
		}
		b.state, b.appliedEnd = st, st.end
		if b.clusterID == "" {
			b.clusterID = clusterIDOf(slices.Sorted(slices.Values(b.cfg.Cluster.Nodes)))
		}
		b.nextProducerID, b.producerIDBlockEnd = 0, 0 // each node's own block, granted by the cluster
	}
	if b.clusterID == "" {
		b.clusterID = newClusterID()
		if err := b.meta.write(clusterKey, clusterRecord{ClusterID: b.clusterID}); err != nil {
			return err
		}
	}
	b.deletedTopics = st.deletedTopics
	// Every topic at once: openPartitions bounds the partitions in flight.
	names := slices.Sorted(maps.Keys(st.topics))
	var wg sync.WaitGroup
	for _, name := range names {
		t := b.newTopic(st.topics[name])
		b.addTopicLocked(t)
		if b.cfg.Cluster != nil {
			wg.Go(func() { t.partitions = b.openClusterPartitions(t, st.topics[name], 0) })
			continue
		}
		wg.Go(func() { t.partitions = b.openPartitions(t, st.topics[name].Partitions) })
	}
	wg.Wait()
	b.settleOrphanDirs()
	return nil
}

// Close stops the background loops and closes every log cleanly, so the
// next start need not rescan them.
func (b *Broker) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	close(b.stop)
	if b.stopCluster != nil {
		b.stopCluster(ErrClosed)
	}
	b.bg.Wait()
	b.flusher.Stop()
	return b.closeLogs()
}

func (b *Broker) closeLogs() error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	// Several at once, as at start-up: each close waits for fsyncs.
	for _, t := range b.topics {
		for _, p := range t.Partitions() {
			if p.log == nil {
				continue
			}
			b.openSlots <- struct{}{}
			wg.Go(func() {
				defer func() { <-b.openSlots }()
				err := errors.Join(p.maintainProducers(time.Now()), p.log.Close())
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	errs = append(errs, b.meta.close())
	return errors.Join(errs...)
}

// addTopicLocked makes t known by name, ID and collision name. The caller
// holds b.mu, or is Open.
func (b *Broker) addTopicLocked(t *Topic) {
	b.topics[t.name] = t
	b.byID[t.id] = t
	b.byCollisionName[collisionName(t.name)] = t
}

// removeTopicLocked undoes addTopicLocked; the caller holds b.mu.
func (b *Broker) removeTopicLocked(t *Topic) {
	delete(b.topics, t.name)
	delete(b.byID, t.id)
	delete(b.byCollisionName, collisionName(t.name))
}

// ClusterID is generated on first start and kept in the metadata log.
func (b *Broker) ClusterID() string { return b.clusterID }

// NodeID is this broker's id in Metadata responses.
func (b *Broker) NodeID() int32 { return b.cfg.NodeID }

// DataDir is the directory holding every log.
func (b *Broker) DataDir() string { return b.cfg.DataDir }

// Topic returns the named topic.
func (b *Broker) Topic(name string) (*Topic, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if t, ok := b.topics[name]; ok {
		return t, nil
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownTopic, name)
}

// TopicByID returns the topic with the given UUID.
func (b *Broker) TopicByID(id [16]byte) (*Topic, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if t, ok := b.byID[id]; ok {
		return t, nil
	}
	return nil, fmt.Errorf("%w: id %x", ErrUnknownTopic, id)
}

// TopicOrCreate returns the named topic, creating it with the default
// partition count when auto.create.topics.enable is on.
func (b *Broker) TopicOrCreate(name string) (*Topic, error) {
	t, err := b.Topic(name)
	if err == nil || !*b.cfg.AutoCreateTopics {
		return t, err
	}
	t, err = b.CreateTopic(TopicSpec{Name: name, Partitions: -1}, false)
	if errors.Is(err, ErrTopicExists) { // created concurrently
		return b.Topic(name)
	}
	return t, err
}

// Topics returns every topic, sorted by name.
func (b *Broker) Topics() []*Topic {
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := slices.Collect(maps.Values(b.topics))
	slices.SortFunc(out, func(x, y *Topic) int {
		switch {
		case x.name < y.name:
			return -1
		case x.name > y.name:
			return 1
		}
		return 0
	})
	return out
}

func newClusterID() string {
	// Kafka cluster ids are 16 random bytes in URL-safe base64; hex reads as well.
	var id [16]byte
	rand.Read(id[:])
	return hex.EncodeToString(id[:])
}

func (b *Broker) retentionLoop() {
	defer b.bg.Done()
	tick := time.NewTicker(b.cfg.RetentionCheck)
	defer tick.Stop()
	for {
		select {
		case <-b.stop:
			return
		case now := <-tick.C:
			b.forEachLog(func(p *Partition) error {
				_, err := p.log.ApplyRetention(now)
				return errors.Join(err, p.maintainProducers(now))
			}, "retention")
		}
	}
}

// forEachLog runs fn on every online partition, logging failures: a
// background task failing on one partition must not stop the others.
func (b *Broker) forEachLog(fn func(*Partition) error, task string) {
	for _, t := range b.Topics() {
		for _, p := range t.Partitions() {
			if p.log == nil || p.Offline() != nil {
				continue // no replica here (a cluster's), or offline
			}
			if err := fn(p); err != nil && !errors.Is(err, replica.ErrClosed) { // closed: deleted meanwhile
				b.logger.Error(task+" failed", "topic", t.name, "partition", p.index, "err", err)
			}
		}
	}
}

func (b *Broker) partitionDir(topic string, index int32) string {
	return filepath.Join(b.cfg.DataDir, fmt.Sprintf("%s-%d", topic, index))
}

// DefaultPartitions is num.partitions: the count a topic created with -1
// partitions gets.
func (b *Broker) DefaultPartitions() int32 { return b.cfg.DefaultPartitions }
