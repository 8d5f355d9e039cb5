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
	"context"
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
// needs it: which partition of __consumer_offsets a group's offsets are
// in, and whether it can be written. (Once a marker is durable there, the
// broker's marker hook tells the group coordinator the outcome.)
type GroupCompleter interface {
	PartitionFor(group string) int32
	// Writable is nil unless the group's partition cannot be used.
	Writable(group string) error
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

	// views is what produce verification reads: transactional id →
	// *txnView (verify.go).
	views sync.Map

	// completions runs the asynchronous second half of EndTxn (markers,
	// then Complete*); closing refuses new ones so Close can wait for all.
	completionsMu sync.Mutex
	completions   sync.WaitGroup
	closing       bool

	stop chan struct{}
	done chan struct{}
	once sync.Once

	// In a cluster (leadership.go): the loop that follows the leadership
	// of the partitions of __transaction_state and the loads it starts,
	// the context that ends them, and a kick for the loop when a load is
	// over.
	leading     sync.WaitGroup
	loadsCtx    context.Context
	cancelLoads context.CancelFunc
	leadKick    chan struct{}
}

// Open rebuilds every transactional id from __transaction_state (when it
// exists; it is created on first use), finishes transactions that were committing or aborting when
// the broker stopped, and starts the timeout goroutine. Transactions that
// were open stay open: their producer may go on, or the timeout aborts
// them. A partition of __transaction_state that is offline or cannot be
// read fences only its own ids (Available); their transactions stay as
// they were until it is repaired.
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
		if store, err = openStore(cfg.Broker, cfg.Partitions, false); err != nil {
			return nil, err
		}
		if !store.clustered {
			txns = store.load(store.parts())
		}
	}
	c := &Coordinator{
		cfg: cfg, b: cfg.Broker, log: cfg.Logger.With("component", "txn"), now: cfg.Now, store: store,
		txns: txns, stop: make(chan struct{}), done: make(chan struct{}), leadKick: make(chan struct{}, 1),
	}
	c.loadsCtx, c.cancelLoads = context.WithCancel(context.Background())
	if store != nil {
		for partition, err := range store.unreadable {
			c.log.Error("a partition of "+StateTopic+" cannot be read: its transactional ids are unavailable (COORDINATOR_NOT_AVAILABLE) until it is repaired",
				"partition", partition, "err", err)
		}
	}
	for _, t := range txns {
		t.mu.Lock()
		c.finishPrepared(t)
		c.publish(t)
		t.mu.Unlock()
	}
	c.log.Info("transactional ids loaded", "ids", len(txns))
	go c.run()
	if cfg.Broker.Clustered() {
		cfg.Broker.HandlePartitionCalls(StateTopic, c.answerVerify)
		c.leading.Go(c.followLeadership)
	}
	return c, nil
}

// Close stops the timeout goroutine and waits for the transactions being
// completed. Nothing else is written: the state on disk is what a restart
// should find (a transaction whose completion could not start is still
// PrepareCommit or PrepareAbort there, and Open finishes it).
func (c *Coordinator) Close() error {
	c.once.Do(func() { close(c.stop) })
	c.cancelLoads()
	c.leading.Wait()
	<-c.done
	c.completionsMu.Lock()
	c.closing = true
	c.completionsMu.Unlock()
	c.completions.Wait()
	return nil
}

// Available reports whether this node can coordinate transactional id
// now: nil, or ErrCoordinatorNotAvailable while the id's partition of
// __transaction_state is offline or could not be read at start. Every
// operation on the id answers the same.
func (c *Coordinator) Available(id string) error {
	c.storeMu.Lock()
	s := c.store
	c.storeMu.Unlock()
	if s == nil {
		return nil // created on first use
	}
	return s.available(id)
}

// stateStore returns __transaction_state, creating it on first use.
func (c *Coordinator) stateStore() (*stateStore, error) {
	c.storeMu.Lock()
	defer c.storeMu.Unlock()
	if c.store == nil {
		s, err := openStore(c.b, c.cfg.Partitions, true)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCoordinatorNotAvailable, err)
		}
		c.store = s
	}
	return c.store, nil
}

// write records the id's current state durably.
func (c *Coordinator) write(t *txn) error {
	wait, err := c.appendState(t)
	if err != nil {
		return err
	}
	return wait()
}

// appendState appends the id's current state and returns what waits for it
// to be durable. Records of one id go to one partition in the order they
// are appended, so a later record that is durable implies the earlier ones
// are: a caller that holds t.mu while appending may wait after releasing it.
func (c *Coordinator) appendState(t *txn) (wait func() error, err error) {
	s, err := c.stateStore()
	if err != nil {
		return nil, err
	}
	return s.append(t, c.now())
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
	s, err := c.stateStore()
	if err != nil {
		return InitResult{}, err
	}
	if err := s.available(id); err != nil {
		return InitResult{}, err
	}
	deadline := time.Now().Add(completionWait)
	var (
		t     *txn
		fresh bool
	)
	for {
		c.mu.Lock()
		if err := s.available(id); err != nil {
			c.mu.Unlock() // leadership moved while it waited
			return InitResult{}, err
		}
		t = c.txns[id]
		fresh = t == nil
		if fresh {
			t = &txn{id: id, producerID: -1}
			c.txns[id] = t
		}
		t.mu.Lock()
		c.mu.Unlock()
		if t.completing == nil {
			break
		}
		if !t.awaitCompletion(deadline) {
			return InitResult{}, fmt.Errorf("%w: the previous transaction of %q is still completing", ErrConcurrentTransactions, id)
		}
	}
	defer t.mu.Unlock()
	defer c.publish(t) // whatever changed, before the lock is released

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
		if err := c.end(t, false, false); err != nil {
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
// producer commits for the group (TxnOffsetCommit). A group whose
// partition is unavailable is refused before it joins the transaction:
// its marker could not be written, and the transaction could not end.
func (c *Coordinator) AddOffsets(id string, producerID int64, epoch int16, group string) error {
	if c.cfg.Groups == nil {
		return fmt.Errorf("%w: no group coordinator", ErrCoordinatorNotAvailable)
	}
	if err := c.cfg.Groups.Writable(group); err != nil {
		return fmt.Errorf("%w: group %q: %v", ErrCoordinatorNotAvailable, group, err)
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
// If the id's previous transaction is still being completed (EndTxn
// answered, markers still being written) it waits for that first, up to
// completionWait, and then answers CONCURRENT_TRANSACTIONS as Kafka does:
// the next transaction must not start before the last one's markers are
// in every partition.
func (c *Coordinator) lockCurrent(id string, producerID int64, epoch int16) (*txn, error) {
	if err := c.Available(id); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(completionWait)
	for {
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
		if t.completing == nil {
			return t, nil
		}
		if !t.awaitCompletion(deadline) {
			return nil, fmt.Errorf("%w: transactional id %q is completing its transaction", ErrConcurrentTransactions, id)
		}
		// Locked and checked again at the top: the id may have changed.
	}
}

// completionWait bounds how long a request waits for the previous
// transaction of its id to be completed before it is answered
// CONCURRENT_TRANSACTIONS (which clients retry).
const completionWait = 5 * time.Second

func (c *Coordinator) add(t *txn, parts []TopicPartition) error {
	defer c.publish(t)
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

// EndTxn commits or aborts the producer's transaction. As in Kafka it
// answers once the decision (PrepareCommit or PrepareAbort) is durable in
// __transaction_state: from then on the outcome is fixed, and a restart
// finishes it. The markers, written to every partition of the transaction
// at once, and the final Complete* record follow in the background; until
// they are done read_committed readers do not see the transaction's data
// (the partitions' last stable offset stays below it), and the id's next
// request that starts or ends a transaction waits for them (lockCurrent).
// A retried EndTxn of a completed transaction with the same outcome
// succeeds again.
func (c *Coordinator) EndTxn(id string, producerID int64, epoch int16, commit bool) error {
	t, err := c.lockCurrent(id, producerID, epoch)
	if err != nil {
		return err
	}
	defer t.mu.Unlock()
	switch t.state {
	case kmsg.TransactionStateOngoing:
		return c.end(t, commit, true)
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

// end takes an open transaction through Prepare* to Complete*. With async
// it returns once Prepare* is durable and completes the transaction in
// the background (completeAsync); otherwise it returns when the
// transaction is complete. t.mu must be held.
func (c *Coordinator) end(t *txn, commit, async bool) error {
	t.state = kmsg.TransactionStatePrepareAbort
	if commit {
		t.state = kmsg.TransactionStatePrepareCommit
	}
	c.publish(t) // no more batches from here on
	if err := c.write(t); err != nil {
		t.state = kmsg.TransactionStateOngoing
		c.publish(t)
		return err
	}
	if async && c.completeAsync(t) {
		return nil
	}
	if !c.finishPrepared(t) {
		// The decision is durable; the timeout loop retries the markers.
		return fmt.Errorf("%w: writing the markers of %q failed; they will be retried", ErrConcurrentTransactions, t.id)
	}
	return nil
}

// completeAsync starts the completion of a transaction in Prepare* state
// on a goroutine of its own, which the coordinator's Close waits for. It
// reports false, starting nothing, once the coordinator is closing. t.mu
// must be held; the goroutine takes it only to record the outcome, so
// requests of the id wait on t.completing meanwhile, not on the lock.
func (c *Coordinator) completeAsync(t *txn) bool {
	c.completionsMu.Lock()
	defer c.completionsMu.Unlock()
	if c.closing {
		return false
	}
	commit := t.state == kmsg.TransactionStatePrepareCommit
	producerID, epoch, parts := t.producerID, t.epoch, t.partitionList()
	done := make(chan struct{})
	t.completing = done
	c.completions.Add(1)
	go func() {
		defer c.completions.Done()
		written := c.writeMarkers(t.id, producerID, epoch, commit, parts)
		t.mu.Lock()
		// Complete* is appended, not waited for: nothing depends on it
		// being durable. The id's next state change (appended after it,
		// to the same partition, and waited for) or the broker's flush
		// covers it; a crash before either leaves Prepare*, and the
		// restart writes the (durable) markers again, which is harmless.
		// Waiting here would start an fsync that the next transaction's
		// AddPartitionsToTxn, appended a moment later, could not share.
		_ = c.recordMarkers(t, written, commit)
		t.completing = nil
		t.mu.Unlock()
		close(done)
	}()
	return true
}

// finishPrepared writes the markers of a transaction that is committing or
// aborting and completes it. It reports whether the transaction is no
// longer in a Prepare state. t.mu must be held, and no completion of t may
// be running (t.completing nil).
func (c *Coordinator) finishPrepared(t *txn) bool {
	var commit bool
	switch t.state {
	case kmsg.TransactionStatePrepareCommit:
		commit = true
	case kmsg.TransactionStatePrepareAbort:
	default:
		return true
	}
	written := c.writeMarkers(t.id, t.producerID, t.epoch, commit, t.partitionList())
	wait := c.recordMarkers(t, written, commit)
	if wait == nil {
		return false
	}
	if err := wait(); err != nil {
		// The markers are written; a restart finishing again is harmless.
		c.log.Error("cannot record a completed transaction", "transactional_id", t.id, "err", err)
	}
	return true
}

// writeMarkers writes the COMMIT or ABORT marker of a producer to every
// partition at once, each durable before it counts: the fsyncs of
// different partitions overlap, and each group-commits with the appends
// of its own partition. It returns, in the order of parts, which were
// written (a deleted partition counts as written: nothing to mark).
func (c *Coordinator) writeMarkers(id string, producerID int64, epoch int16, commit bool, parts []TopicPartition) []bool {
	written := make([]bool, len(parts))
	mark := func(i int) { written[i] = c.writeMarker(id, producerID, epoch, commit, parts[i]) }
	if len(parts) == 1 {
		mark(0)
		return written
	}
	var wg sync.WaitGroup
	for i := range parts {
		wg.Go(func() { mark(i) })
	}
	wg.Wait()
	return written
}

// writeMarker writes one marker, through the partition's leader (which,
// for __consumer_offsets, tells its group coordinator the outcome). It
// reports whether the partition is done.
func (c *Coordinator) writeMarker(id string, producerID int64, epoch int16, commit bool, tp TopicPartition) bool {
	topic, err := c.b.Topic(tp.Topic)
	if err != nil {
		return true // deleted: nothing to mark
	}
	p, err := topic.Partition(tp.Partition)
	if err != nil {
		return true
	}
	err = p.WriteTxnMarker(producerID, epoch, commit, coordinatorEpoch)
	if errors.Is(err, broker.ErrInvalidProducerEpoch) {
		// A newer epoch already wrote here: nothing of ours to end.
		c.log.Warn("transaction marker refused", "transactional_id", id, "topic", tp.Topic, "partition", tp.Partition, "err", err)
		err = nil
	}
	if err != nil {
		c.log.Error("cannot write transaction marker", "transactional_id", id, "topic", tp.Topic, "partition", tp.Partition, "err", err)
		return false
	}
	return true
}

// recordMarkers drops the partitions whose marker is written from the
// transaction; when none is left it moves the transaction to Complete*,
// appends that state and returns what waits for it to be durable. It
// returns nil while some marker is missing (the timeout loop retries
// them). t.mu must be held.
func (c *Coordinator) recordMarkers(t *txn, written []bool, commit bool) (wait func() error) {
	parts := t.partitionList()
	missing := false
	for i, ok := range written {
		if ok {
			t.removePartition(parts[i].Topic, parts[i].Partition)
		} else {
			missing = true
		}
	}
	if missing {
		return nil
	}
	t.state = kmsg.TransactionStateCompleteAbort
	if commit {
		t.state = kmsg.TransactionStateCompleteCommit
	}
	t.partitions, t.started = nil, time.Time{}
	wait, err := c.appendState(t)
	if err != nil {
		return func() error { return err }
	}
	return wait
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
		if c.Available(t.id) != nil {
			continue // nothing can be written for it; it waits as it is
		}
		if !t.mu.TryLock() {
			continue // busy: an operation is running on it
		}
		if t.completing != nil {
			t.mu.Unlock()
			continue // being completed
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
	if err := c.end(t, false, false); err != nil {
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
		if c.Available(t.id) != nil {
			continue // as Kafka lists only the ids of its loaded partitions
		}
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
		if c.Available(id) != nil || !t.mu.TryLock() {
			continue // its tombstone cannot be written; or busy, so not idle
		}
		if t.expired(now, c.cfg.IDExpiration) {
			if err := c.writeTombstone(id); err != nil {
				c.log.Error("cannot expire a transactional id", "transactional_id", id, "err", err)
			} else {
				t.removed = true
				delete(c.txns, id)
				c.unpublish(id)
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
