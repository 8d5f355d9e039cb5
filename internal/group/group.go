package group

import (
	"sync"
	"time"

	"github.com/wharf-mq/wharf/internal/record"
)

// groupKind says which protocol a group's members speak.
type groupKind int8

const (
	kindClassic  groupKind = iota // JoinGroup / SyncGroup, or only offset commits
	kindConsumer                  // ConsumerGroupHeartbeat (KIP-848)
)

// String is the kind as ListGroups reports it.
func (k groupKind) String() string {
	if k == kindConsumer {
		return "consumer"
	}
	return "classic"
}

// committedOffset is one committed offset of a group.
type committedOffset struct {
	offset      int64
	leaderEpoch int32
	metadata    string
	committedAt time.Time
}

// group is one group: its members (of one kind) and its committed offsets.
// Everything in it is guarded by mu.
type group struct {
	c         *Coordinator
	name      string
	partition int32 // of __consumer_offsets

	mu      sync.Mutex
	removed bool // deleted; a caller holding a stale pointer looks it up again
	written bool // a record was written for it since it was made or loaded
	kind    groupKind
	offsets map[string]map[int32]committedOffset
	// pendingTxn are offsets committed inside transactions not yet decided,
	// by producer id (txn_offsets.go).
	pendingTxn map[int64]map[TopicPartition]committedOffset
	// emptySince is when the group last became empty, the start of its
	// offsets' retention (zero while it has members).
	emptySince time.Time

	classic  classicGroup
	consumer consumerGroup
}

func newGroup(c *Coordinator, name string) *group {
	g := &group{
		c:         c,
		name:      name,
		partition: c.store.partitionFor(name),
		offsets:   map[string]map[int32]committedOffset{},
	}
	g.classic.init(c.cfg.Now())
	g.consumer.init()
	return g
}

func (g *group) now() time.Time { return g.c.cfg.Now() }

// hasMembers reports whether anyone is in the group.
func (g *group) hasMembers() bool {
	if g.kind == kindConsumer {
		return len(g.consumer.members) > 0
	}
	return len(g.classic.members) > 0 || len(g.classic.pending) > 0
}

// state is the group's state as ListGroups and DescribeGroups name it.
func (g *group) state() string {
	if g.kind == kindConsumer {
		return g.consumer.stateName()
	}
	return g.classic.state.String()
}

// protocolType is what ListGroups reports: "consumer" for KIP-848 groups.
func (g *group) protocolType() string {
	if g.kind == kindConsumer {
		return "consumer"
	}
	return g.classic.protocolType
}

// becameEmpty starts the retention clock of the group's offsets.
func (g *group) becameEmpty(now time.Time) { g.emptySince = now }

// tick looks at every deadline of the group and acts on those passed.
func (g *group) tick(now time.Time) {
	if g.kind == kindConsumer {
		g.consumerTick(now)
	} else {
		g.classicTick(now)
	}
	g.scheduleWake()
}

// scheduleWake registers the group's earliest deadline with the
// coordinator's timer loop.
func (g *group) scheduleWake() {
	var next time.Time
	if g.kind == kindConsumer {
		next = g.consumer.nextDeadline()
	} else {
		next = g.classic.nextDeadline()
	}
	if !next.IsZero() {
		g.c.wake.at(g.name, next)
	}
}

// write appends records to the group's partition of __consumer_offsets.
func (g *group) write(recs []record.Record, durable bool) error {
	if err := g.c.store.append(g.partition, recs, durable); err != nil {
		return err
	}
	g.written = true
	return nil
}

// writeLogged is write for state changes no client waits on (a timer
// fired): a failure is logged, and the in-memory state goes on.
func (g *group) writeLogged(recs []record.Record, what string) {
	if err := g.write(recs, false); err != nil {
		g.c.log.Error("cannot record group change", "group", g.name, "change", what, "err", err)
	}
}

// isDisposable reports a group that a request made and left holding
// nothing: no members, no offsets, never a protocol and nothing written.
// It is dropped when the request ends, so that failed requests leave no
// groups behind. (A group emptied by deletions stays until the retention
// sweep, as in Kafka.)
func (g *group) isDisposable() bool {
	return !g.written && g.holdsNothing()
}

// holdsNothing reports a group with no members, no offsets and no
// protocol: a load drops such groups (all their records were tombstones).
func (g *group) holdsNothing() bool {
	return g.kind == kindClassic && g.classic.protocolType == "" && g.classic.generation == 0 &&
		!g.hasMembers() && len(g.offsets) == 0
}

// markRemoved takes the group out of the coordinator. g.mu must be held.
func (g *group) markRemoved() {
	g.removed = true
	g.c.mu.Lock()
	if g.c.groups[g.name] == g {
		delete(g.c.groups, g.name)
	}
	g.c.mu.Unlock()
}
