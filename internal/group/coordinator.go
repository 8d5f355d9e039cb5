package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"
)

// Coordinator is the group coordinator of one Wharf node. Open starts it;
// Close stops it.
type Coordinator struct {
	cfg   Config
	log   *slog.Logger
	store *offsetsStore
	wake  *wakeups

	mu     sync.Mutex
	groups map[string]*group
	closed bool
	// lateMarkers are transaction outcomes heard while their partition's
	// groups were being loaded (CompleteTxn); guarded by mu.
	lateMarkers map[int32][]txnOutcome

	loop bool          // run was started (Open); tests use open and no loop
	stop chan struct{} // closed by Close: ends the timer loop
	done chan struct{} // closed when the timer loop has returned

	// In a cluster (leadership.go): the loop that follows the leadership
	// of the partitions and the loads it starts, the context that ends
	// them, and a kick for the loop when a load is over.
	leading     sync.WaitGroup
	loadsCtx    context.Context
	cancelLoads context.CancelFunc
	leadKick    chan struct{}
}

// Open creates __consumer_offsets if it does not exist, rebuilds every
// group from it and starts the goroutine that runs the groups' timers. A
// partition of __consumer_offsets that is offline or cannot be read fences
// only its own groups (Available).
func Open(cfg Config) (*Coordinator, error) {
	c, err := open(cfg)
	if err != nil {
		return nil, err
	}
	c.loop = true
	go c.run()
	if c.store.clustered {
		c.leading.Go(c.followLeadership)
	}
	return c, nil
}

// open is Open without the timer goroutine: tests drive time themselves
// through advance.
func open(cfg Config) (*Coordinator, error) {
	if cfg.Broker == nil {
		return nil, errors.New("group: no broker")
	}
	cfg = cfg.withDefaults()
	log := cfg.Logger.With("component", "group")
	store, err := openStore(cfg.Broker, cfg)
	if err != nil {
		return nil, err
	}
	c := &Coordinator{
		cfg:         cfg,
		log:         log,
		store:       store,
		wake:        newWakeups(),
		groups:      map[string]*group{},
		lateMarkers: map[int32][]txnOutcome{},
		stop:        make(chan struct{}),
		done:        make(chan struct{}),
		leadKick:    make(chan struct{}, 1),
	}
	c.loadsCtx, c.cancelLoads = context.WithCancel(context.Background())
	if !store.clustered {
		// A single node serves every partition, for good.
		all := make([]int32, len(store.parts()))
		for i := range all {
			all[i] = int32(i)
		}
		c.groups = c.load(all)
		for _, g := range c.groups {
			g.scheduleWake()
		}
	}
	return c, nil
}

// Close stops the timers and answers every JoinGroup and SyncGroup still
// waiting with NOT_COORDINATOR. Nothing is written: the state on disk is
// already what a restart should find.
func (c *Coordinator) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	groups := slices.Collect(maps.Values(c.groups))
	c.mu.Unlock()

	close(c.stop)
	c.cancelLoads()
	c.leading.Wait()
	if c.loop {
		<-c.done
	}
	for _, g := range groups {
		g.mu.Lock()
		g.failWaiting(ErrNotCoordinator)
		g.mu.Unlock()
	}
	return nil
}

// Available reports whether this node can coordinate group now: nil, or
// ErrCoordinatorNotAvailable while the group's partition of
// __consumer_offsets is offline or could not be read at start. Every
// operation on the group answers the same.
func (c *Coordinator) Available(group string) error {
	return c.store.available(c.store.partitionFor(group))
}

// CoordinatorNode is the node that coordinates group: this one (self) on
// a single node; in a cluster, the leader of the group's partition
// (ErrCoordinatorNotAvailable while none is known, or while the partition
// is unusable here).
func (c *Coordinator) CoordinatorNode(group string, self int32) (int32, error) {
	partition := c.store.partitionFor(group)
	if err := c.store.usable(partition); err != nil {
		return -1, err
	}
	if !c.store.clustered {
		return self, nil
	}
	leader, _, _ := c.store.parts()[partition].Leadership(self)
	if leader < 0 {
		return -1, fmt.Errorf("%w: %s-%d has no leader", ErrCoordinatorNotAvailable, OffsetsTopic, partition)
	}
	return leader, nil
}

// Writable reports whether a transaction may write to group's partition
// of __consumer_offsets (its marker, on whichever node leads it): nil
// unless the partition is offline or unreadable here.
func (c *Coordinator) Writable(group string) error {
	return c.store.usable(c.store.partitionFor(group))
}

// PartitionFor is the partition of __consumer_offsets that holds a group.
func (c *Coordinator) PartitionFor(group string) int32 { return c.store.partitionFor(group) }

// HeartbeatInterval is the interval KIP-848 members are told to heartbeat at.
func (c *Coordinator) HeartbeatInterval() time.Duration { return c.cfg.ConsumerHeartbeatInterval }

// withGroup runs fn on the named group with the group locked. With create
// it makes the group if there is none; without, a missing group is
// ErrGroupIDNotFound. A group that fn leaves holding nothing is dropped. A
// group whose partition is unavailable is ErrCoordinatorNotAvailable (in
// a cluster, ErrNotCoordinator on any node but its partition's leader).
// Availability is checked under mu, which a leadership change holds while
// it drops a partition's groups.
func (c *Coordinator) withGroup(name string, create bool, fn func(g *group)) error {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return fmt.Errorf("%w: the coordinator is shutting down", ErrNotCoordinator)
		}
		if err := c.Available(name); err != nil {
			c.mu.Unlock()
			return err
		}
		g := c.groups[name]
		if g == nil {
			if !create {
				c.mu.Unlock()
				return fmt.Errorf("%w: %q", ErrGroupIDNotFound, name)
			}
			g = newGroup(c, name)
			c.groups[name] = g
		}
		c.mu.Unlock()

		g.mu.Lock()
		if g.removed {
			// Deleted between the lookup and the lock: look again.
			g.mu.Unlock()
			continue
		}
		fn(g)
		if !g.removed {
			if g.isDisposable() {
				g.markRemoved()
			} else {
				g.scheduleWake()
			}
		}
		g.mu.Unlock()
		return nil
	}
}

// snapshot returns every group whose partition is available, for
// operations that visit them all.
func (c *Coordinator) snapshot() []*group {
	c.mu.Lock()
	groups := slices.Collect(maps.Values(c.groups))
	c.mu.Unlock()
	return slices.DeleteFunc(groups, func(g *group) bool { return c.store.available(g.partition) != nil })
}

// validGroupID applies Kafka's rule: a group id may not be empty, except
// in the offset and admin APIs, which old clients call with "".
func validGroupID(id string, emptyAllowed bool) error {
	if id == "" && !emptyAllowed {
		return fmt.Errorf("%w: the group id is empty", ErrInvalidGroupID)
	}
	return nil
}

// run is the timer loop: it wakes groups whose deadlines have passed and
// expires offsets every RetentionCheckInterval, until Close.
func (c *Coordinator) run() {
	defer close(c.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	retention := time.NewTicker(c.cfg.RetentionCheckInterval)
	defer retention.Stop()
	for {
		var fire <-chan time.Time
		if next, ok := c.wake.next(); ok {
			timer.Reset(max(0, next.Sub(c.cfg.Now())))
			fire = timer.C
		}
		select {
		case <-c.stop:
			return
		case <-c.wake.kick:
		case <-fire:
			c.fireDue(c.cfg.Now())
		case <-retention.C:
			c.expireOffsets(c.cfg.Now())
		}
	}
}

// fireDue wakes every group whose deadline is at or before now.
func (c *Coordinator) fireDue(now time.Time) {
	for _, name := range c.wake.due(now) {
		_ = c.withGroup(name, false, func(g *group) { g.tick(now) })
	}
}

// wait blocks for a parked request's answer, or until ctx ends.
func wait[T any](ctx context.Context, ch <-chan T, canceled T) T {
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
		return canceled
	}
}

// replyOnce makes the callback a parked request is answered through. It
// never blocks and ignores all but the first answer.
func replyOnce[T any]() (chan T, func(T)) {
	ch := make(chan T, 1)
	return ch, func(r T) {
		select {
		case ch <- r:
		default:
		}
	}
}
