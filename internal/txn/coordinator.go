// Package txn is Wharf's transaction coordinator (KIP-98): it maps each
// transactional.id to a producer id and epoch, fences zombie producers by
// bumping the epoch, tracks the partitions and groups of the open
// transaction, writes COMMIT and ABORT markers to them on EndTxn, aborts
// transactions left open past their timeout, and keeps all of this in
// __transaction_state so that a restart finds it again.
//
// The coordinator speaks transaction version 1 (the pre-KIP-890-part-2
// protocol: AddPartitionsToTxn before producing, EndTxn up to v4, the same
// epoch for every transaction of a producer session). Epochs are bumped on
// InitProducerId (KIP-360 re-initialisation included) and when the broker
// aborts a timed-out transaction.
package txn

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/broker"
)

// Kafka's defaults.
const (
	DefaultMaxTimeout    = 15 * time.Minute   // transaction.max.timeout.ms
	DefaultCheckInterval = time.Second        // how often timed-out transactions are looked for
	DefaultIDExpiration  = 7 * 24 * time.Hour // transactional.id.expiration.ms
	defaultPartitions    = 1                  // of __transaction_state
	offsetsTopic         = "__consumer_offsets"
	coordinatorEpoch     = 0 // one node: the coordinator never moves
)

// GroupCompleter is the group coordinator as the transaction coordinator
// needs it: told after a marker was written to a partition of
// __consumer_offsets, it applies or drops the offsets the producer
// committed in the transaction.
type GroupCompleter interface {
	PartitionFor(group string) int32
	CompleteTxn(partition int32, producerID int64, commit bool)
}

// Config configures a Coordinator.
type Config struct {
	Broker *broker.Broker
	// Groups receives the outcome of transactions that committed offsets;
	// nil refuses AddOffsetsToTxn.
	Groups GroupCompleter
	Logger *slog.Logger
	// Partitions of __transaction_state when it is created; 0 means 1.
	Partitions int32
	// MaxTimeout is transaction.max.timeout.ms; 0 means 15 minutes.
	MaxTimeout time.Duration
	// CheckInterval is how often open transactions are checked against
	// their timeout (and idle ids against IDExpiration); 0 means a second.
	CheckInterval time.Duration
	// IDExpiration is transactional.id.expiration.ms: an id with no
	// transaction open and no state change for this long is forgotten (a
	// tombstone in __transaction_state), as Kafka does; its next
	// InitProducerId gets a new producer id. 0 means 7 days.
	IDExpiration time.Duration
	// Now is the clock; nil means time.Now. Tests substitute a fake one.
	Now func() time.Time
}

// Coordinator is the transaction coordinator of one Wharf node. Open
// starts it; Close stops its timeout goroutine.
type Coordinator struct {
	cfg Config
	b   *broker.Broker
	log *slog.Logger
	now func() time.Time

	// store is __transaction_state; nil until the first InitProducerId
	// with a transactional id creates it, so that a broker whose clients
	// never use transactions has no such topic (as in Kafka).
	storeMu sync.Mutex
	store   *stateStore

	mu   sync.Mutex
	txns map[string]*txn

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// Open rebuilds every transactional id from __transaction_state (when it
// exists; it is created on first use), finishes transactions that were committing or aborting when
// the broker stopped, and starts the timeout goroutine. Transactions that
// were open stay open: their producer may go on, or the timeout aborts
// them.
func Open(cfg Config) (*Coordinator, error) {
	if cfg.Broker == nil {
		return nil, errors.New("txn: no broker")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Partitions <= 0 {
		cfg.Partitions = defaultPartitions
	}
	if cfg.MaxTimeout <= 0 {
		cfg.MaxTimeout = DefaultMaxTimeout
	}
	if cfg.CheckInterval <= 0 {
		cfg.CheckInterval = DefaultCheckInterval
	}
	if cfg.IDExpiration <= 0 {
		cfg.IDExpiration = DefaultIDExpiration
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	txns := map[string]*txn{}
	var store *stateStore
	if _, err := cfg.Broker.Topic(StateTopic); err == nil {
		if store, err = openStore(cfg.Broker, cfg.Partitions); err != nil {
			return nil, err
		}
		if txns, err = store.load(); err != nil {
			return nil, err
		}
	}
	c := &Coordinator{
		cfg: cfg, b: cfg.Broker, log: cfg.Logger.With("component", "txn"), now: cfg.Now, store: store,
		txns: txns, stop: make(chan struct{}), done: make(chan struct{}),
	}
	for _, t := range txns {
		t.mu.Lock()
		c.finishPrepared(t)
		t.mu.Unlock()
	}
	c.log.Info("transactional ids loaded", "ids", len(txns))
	go c.run()
	return c, nil
}

// Close stops the timeout goroutine. Nothing is written: the state on disk
// is what a restart should find.
func (c *Coordinator) Close() error {
	c.once.Do(func() { close(c.stop) })
	<-c.done
	return nil
}

// stateStore returns __transaction_state, creating it on first use.
func (c *Coordinator) stateStore() (*stateStore, error) {
	c.storeMu.Lock()
	defer c.storeMu.Unlock()
	if c.store == nil {
		s, err := openStore(c.b, c.cfg.Partitions)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCoordinatorNotAvailable, err)
		}
		c.store = s
	}
	return c.store, nil
}

// write records the id's current state durably.
func (c *Coordinator) write(t *txn) error {
	s, err := c.stateStore()
	if err != nil {
		return err
	}
	return s.write(t, c.now())
}

// lookup returns the id's record, or nil.
func (c *Coordinator) lookup(id string) *txn {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.txns[id]
}

// InitResult is the producer id and epoch InitProducerId hands out.
type InitResult struct {
	ProducerID int64
	Epoch      int16
}

// InitProducerID gives a transactional id's producer its producer id and
// a new epoch, fencing any older producer of the id: an open transaction
// of the old producer is aborted first. producerID and epoch are -1 unless
// the producer re-initialises itself (KIP-360), in which case they must be
// the id's current ones.
func (c *Coordinator) InitProducerID(id string, timeout time.Duration, producerID int64, epoch int16) (InitResult, error) {
	if id == "" {
		return InitResult{}, fmt.Errorf("%w: empty transactional id", ErrInvalidRequest)
	}
	if timeout <= 0 || timeout > c.cfg.MaxTimeout {
		return InitResult{}, fmt.Errorf("%w: %v, the maximum is %v", ErrInvalidTransactionTimeout, timeout, c.cfg.MaxTimeout)
	}
	if _, err := c.stateStore(); err != nil {
		return InitResult{}, err
	}
	c.mu.Lock()
	t := c.txns[id]
	fresh := t == nil
	if fresh {
		t = &txn{id: id, producerID: -1}
		c.txns[id] = t
	}
	t.mu.Lock()
	c.mu.Unlock()
	defer t.mu.Unlock()

	if fresh || t.producerID < 0 {
		pid, err := c.b.AllocateProducerID()
		if err != nil {
			return InitResult{}, fmt.Errorf("%w: %v", ErrCoordinatorNotAvailable, err)
		}
		t.producerID, t.epoch, t.timeout, t.state = pid, 0, timeout, kmsg.TransactionStateEmpty
		if err := c.write(t); err != nil {
			t.producerID = -1
			return InitResult{}, err
		}
		return InitResult{t.producerID, t.epoch}, nil
	}
	if producerID >= 0 && (producerID != t.producerID || epoch != t.epoch) {
		return InitResult{}, fmt.Errorf("%w: transactional id %q is at producer %d epoch %d, the producer has %d/%d",
			ErrProducerFenced, id, t.producerID, t.epoch, producerID, epoch)
	}
	if !c.finishPrepared(t) {
		return InitResult{}, fmt.Errorf("%w: the previous transaction of %q is still completing", ErrConcurrentTransactions, id)
	}
	if t.state == kmsg.TransactionStateOngoing {
		// Fence the old producer and abort what it left open.
		if err := c.bumpEpoch(t); err != nil {
			return InitResult{}, err
		}
		if err := c.end(t, false); err != nil {
			return InitResult{}, err
		}
		c.log.Info("aborted the open transaction of a fenced producer", "transactional_id", id, "producer_id", t.producerID, "epoch", t.epoch)
	} else if err := c.bumpEpoch(t); err != nil {
		return InitResult{}, err
	}
	t.timeout, t.state = timeout, kmsg.TransactionStateEmpty
	t.partitions, t.started = nil, time.Time{}
	if err := c.write(t); err != nil {
		return InitResult{}, err
	}
	return InitResult{t.producerID, t.epoch}, nil
}

// bumpEpoch moves the id to its next epoch, or to a new producer id when
// the epoch is exhausted. It is written with the next state change.
func (c *Coordinator) bumpEpoch(t *txn) error {
	if t.epoch < math.MaxInt16-1 {
		t.epoch++
		return nil
	}
	pid, err := c.b.AllocateProducerID()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrCoordinatorNotAvailable, err)
	}
	t.producerID, t.epoch = pid, 0
	return nil
}

// AddPartitions adds partitions to the producer's transaction, starting
// one if none is open. The result has one error (or nil) per partition.
func (c *Coordinator) AddPartitions(id string, producerID int64, epoch int16, parts []TopicPartition) ([]error, error) {
	t, err := c.lockCurrent(id, producerID, epoch)
	if err != nil {
		return nil, err
	}
	defer t.mu.Unlock()
	results := make([]error, len(parts))
	var ok []TopicPartition
	for i, tp := range parts {
		if results[i] = c.checkPartition(tp); results[i] == nil {
			ok = append(ok, tp)
		}
	}
	if len(ok) < len(parts) {
		// Kafka adds none when one is bad; the others are answered
		// OPERATION_NOT_ATTEMPTED by the front end.
		return results, nil
	}
	return results, c.add(t, ok)
}

// AddOffsets adds the group's partition of __consumer_offsets to the
// producer's transaction, so that EndTxn also decides the offsets the
// producer commits for the group (TxnOffsetCommit).
func (c *Coordinator) AddOffsets(id string, producerID int64, epoch int16, group string) error {
	if c.cfg.Groups == nil {
		return fmt.Errorf("%w: no group coordinator", ErrCoordinatorNotAvailable)
	}
	t, err := c.lockCurrent(id, producerID, epoch)
	if err != nil {
		return err
	}
	defer t.mu.Unlock()
	return c.add(t, []TopicPartition{{offsetsTopic, c.cfg.Groups.PartitionFor(group)}})
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (c *Coordinator) checkPartition(tp TopicPartition) error {
	t, err := c.b.Topic(tp.Topic)
	if err == nil {
		_, err = t.Partition(tp.Partition)
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnknownTopicOrPartition, err)
	}
	return nil
}

// lockCurrent finds the id, locks it and checks the producer is current.
func (c *Coordinator) lockCurrent(id string, producerID int64, epoch int16) (*txn, error) {
	t := c.lookup(id)
	if t == nil {
		return nil, fmt.Errorf("%w: transactional id %q has no producer", ErrInvalidProducerIDMapping, id)
	}
	t.mu.Lock()
	if t.removed {
		// Expired between the lookup and the lock.
		t.mu.Unlock()
		return nil, fmt.Errorf("%w: transactional id %q has no producer", ErrInvalidProducerIDMapping, id)
	}
	if err := t.checkProducer(producerID, epoch); err != nil {
		t.mu.Unlock()
		return nil, err
	}
	return t, nil
}

func (c *Coordinator) add(t *txn, parts []TopicPartition) error {
	switch t.state {
	case kmsg.TransactionStatePrepareCommit, kmsg.TransactionStatePrepareAbort:
		if !c.finishPrepared(t) {
			return fmt.Errorf("%w: transactional id %q is completing its transaction", ErrConcurrentTransactions, t.id)
		}
	}
	changed := t.state != kmsg.TransactionStateOngoing
	if changed {
		t.state, t.partitions, t.started = kmsg.TransactionStateOngoing, nil, c.now()
	}
	for _, tp := range parts {
		if t.addPartition(tp.Topic, tp.Partition) {
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return c.write(t)
}

// EndTxn commits or aborts the producer's transaction: the decision is
// written to __transaction_state, markers to every partition of the
// transaction, and then the transaction is complete. A retried EndTxn of
// a completed transaction with the same outcome succeeds again.
func (c *Coordinator) EndTxn(id string, producerID int64, epoch int16, commit bool) error {
	t, err := c.lockCurrent(id, producerID, epoch)
	if err != nil {
		return err
	}
	defer t.mu.Unlock()
	switch t.state {
	case kmsg.TransactionStateOngoing:
		return c.end(t, commit)
	case kmsg.TransactionStateCompleteCommit:
		if commit {
			return nil
		}
	case kmsg.TransactionStateCompleteAbort:
		if !commit {
			return nil
		}
	case kmsg.TransactionStatePrepareCommit, kmsg.TransactionStatePrepareAbort:
		if (t.state == kmsg.TransactionStatePrepareCommit) == commit {
			if c.finishPrepared(t) {
				return nil
			}
			return fmt.Errorf("%w: transactional id %q is completing its transaction", ErrConcurrentTransactions, id)
		}
	}
	return fmt.Errorf("%w: cannot %s a transaction in state %s", ErrInvalidTxnState, outcome(commit), stateName(t.state))
}

func outcome(commit bool) string {
	if commit {
		return "commit"
	}
	return "abort"
}

// end takes an open transaction through Prepare* to Complete*. t.mu must
// be held.
func (c *Coordinator) end(t *txn, commit bool) error {
	t.state = kmsg.TransactionStatePrepareAbort
	if commit {
		t.state = kmsg.TransactionStatePrepareCommit
	}
	if err := c.write(t); err != nil {
		t.state = kmsg.TransactionStateOngoing
		return err
	}
	if !c.finishPrepared(t) {
		// The decision is durable; the timeout loop retries the markers.
		return fmt.Errorf("%w: writing the markers of %q failed; they will be retried", ErrConcurrentTransactions, t.id)
	}
	return nil
}

// finishPrepared writes the markers of a transaction that is committing or
// aborting and completes it. It reports whether the transaction is no
// longer in a Prepare state. t.mu must be held.
func (c *Coordinator) finishPrepared(t *txn) bool {
	var commit bool
	switch t.state {
	case kmsg.TransactionStatePrepareCommit:
		commit = true
	case kmsg.TransactionStatePrepareAbort:
	default:
		return true
	}
	for _, topic := range slices.Sorted(maps.Keys(t.partitions)) {
		tp, err := c.b.Topic(topic)
		if err != nil {
			continue // deleted: nothing to mark
		}
		for _, idx := range slices.Sorted(maps.Keys(t.partitions[topic])) {
			p, err := tp.Partition(idx)
			if err != nil {
				continue
			}
			err = p.WriteTxnMarker(t.producerID, t.epoch, commit, coordinatorEpoch)
			if errors.Is(err, broker.ErrInvalidProducerEpoch) {
				// A newer epoch already wrote here: nothing of ours to end.
				c.log.Warn("transaction marker refused", "transactional_id", t.id, "topic", topic, "partition", idx, "err", err)
				err = nil
			}
			if err != nil {
				c.log.Error("cannot write transaction marker", "transactional_id", t.id, "topic", topic, "partition", idx, "err", err)
				return false
			}
			if topic == offsetsTopic && c.cfg.Groups != nil {
				c.cfg.Groups.CompleteTxn(idx, t.producerID, commit)
			}
			delete(t.partitions[topic], idx)
		}
		delete(t.partitions, topic)
	}
	t.state = kmsg.TransactionStateCompleteAbort
	if commit {
		t.state = kmsg.TransactionStateCompleteCommit
	}
	t.partitions, t.started = nil, time.Time{}
	if err := c.write(t); err != nil {
		// The markers are written; a restart finishing again is harmless.
		c.log.Error("cannot record a completed transaction", "transactional_id", t.id, "err", err)
	}
	return true
}

// run aborts transactions open past their timeout and retries unfinished
// markers, until Close.
func (c *Coordinator) run() {
	defer close(c.done)
	tick := time.NewTicker(c.cfg.CheckInterval)
	defer tick.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-tick.C:
			c.sweep(c.now())
		}
	}
}

// sweep finishes transactions whose markers are unwritten, aborts those
// open past their timeout and forgets ids idle past IDExpiration.
func (c *Coordinator) sweep(now time.Time) {
	c.expireIDs(now)
	c.mu.Lock()
	all := slices.Collect(maps.Values(c.txns))
	c.mu.Unlock()
	for _, t := range all {
		if !t.mu.TryLock() {
			continue // busy: an operation is running on it
		}
		c.finishPrepared(t)
		if t.state == kmsg.TransactionStateOngoing && now.Sub(t.started) > t.timeout {
			c.abortTimedOut(t)
		}
		t.mu.Unlock()
	}
}

// abortTimedOut aborts an open transaction at a bumped epoch, so that its
// producer is fenced: its next request is answered PRODUCER_FENCED.
func (c *Coordinator) abortTimedOut(t *txn) {
	oldPID, oldEpoch := t.producerID, t.epoch
	if err := c.bumpEpoch(t); err != nil {
		c.log.Error("cannot abort a timed-out transaction", "transactional_id", t.id, "err", err)
		return
	}
	if t.producerID != oldPID {
		// Epoch exhausted: the markers must still carry the old id.
		t.producerID, t.epoch = oldPID, oldEpoch
	}
	if err := c.end(t, false); err != nil {
		c.log.Error("cannot abort a timed-out transaction", "transactional_id", t.id, "err", err)
		return
	}
	c.log.Info("aborted a transaction past its timeout", "transactional_id", t.id, "producer_id", t.producerID, "epoch", t.epoch, "timeout", t.timeout)
}

// Describe returns the named ids; a missing one has a nil entry.
func (c *Coordinator) Describe(ids []string) []*Description {
	out := make([]*Description, len(ids))
	for i, id := range ids {
		if t := c.lookup(id); t != nil {
			t.mu.Lock()
			if t.producerID >= 0 {
				d := t.describe()
				out[i] = &d
			}
			t.mu.Unlock()
		}
	}
	return out
}

// List returns every transactional id, sorted by id.
func (c *Coordinator) List() []Description {
	c.mu.Lock()
	all := slices.Collect(maps.Values(c.txns))
	c.mu.Unlock()
	var out []Description
	for _, t := range all {
		t.mu.Lock()
		if t.producerID >= 0 {
			out = append(out, t.describe())
		}
		t.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b Description) int {
		switch {
		case a.TransactionalID < b.TransactionalID:
			return -1
		case a.TransactionalID > b.TransactionalID:
			return 1
		}
		return 0
	})
	return out
}

// expireIDs forgets the transactional ids that have had no transaction
// open and no state change for IDExpiration (Kafka's
// transactional.id.expiration.ms): each gets a tombstone in
// __transaction_state, so a restart does not find it either. c.mu is held
// throughout so that InitProducerID (which locks an id while holding c.mu)
// cannot pick up an id being removed; the other operations see removed.
func (c *Coordinator) expireIDs(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, t := range c.txns {
		if !t.mu.TryLock() {
			continue // busy, so not idle
		}
		if t.expired(now, c.cfg.IDExpiration) {
			if err := c.writeTombstone(id); err != nil {
				c.log.Error("cannot expire a transactional id", "transactional_id", id, "err", err)
			} else {
				t.removed = true
				delete(c.txns, id)
				c.log.Info("transactional id expired", "transactional_id", id, "producer_id", t.producerID, "idle", now.Sub(t.updated))
			}
		}
		t.mu.Unlock()
	}
}

func (c *Coordinator) writeTombstone(id string) error {
	s, err := c.stateStore()
	if err != nil {
		return err
	}
	return s.writeTombstone(id, c.now())
}
