package raft

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// Config is a host's configuration; zero fields take the defaults named.
type Config struct {
	// NodeID is this node's id in every group it hosts (not 0).
	NodeID uint64
	// Transport carries the host's traffic to other nodes; nil for a host
	// whose groups have no other members.
	Transport Transport
	// TickInterval is the length of a Raft tick (100 ms).
	TickInterval time.Duration
	// ElectionTicks is the election timeout in ticks (10): a follower
	// that heard nothing from its leader for between one and two of them
	// campaigns. HeartbeatTicks is how often a leader of an active group
	// sends heartbeats, and the host its pings (1).
	ElectionTicks, HeartbeatTicks int
	// LivenessTicks is how long a peer may stay silent, in ticks, before
	// the host takes it for down and wakes the quiesced groups it led
	// (ElectionTicks/2). Every host pings its peers every HeartbeatTicks,
	// so this is several missed pings.
	LivenessTicks int
	// MaxSizePerMsg bounds the entries of one append message (1 MiB);
	// MaxInflightMsgs the append messages in flight to one follower of a
	// group (256); MaxUncommittedBytes a leader's uncommitted entries, past
	// which proposals are refused (64 MiB).
	MaxSizePerMsg       uint64
	MaxInflightMsgs     int
	MaxUncommittedBytes uint64
	// SyncWorkers is how many groups' fsyncs a sync round runs at once (16).
	SyncWorkers int
	// SyncRounds is how many sync rounds may be in flight at once (4):
	// what the groups write while one round fsyncs goes to disk in the
	// next at once, not after the loop has heard the first one end.
	SyncRounds int
	// MaxInboxBytes bounds what the transports may queue for the loop;
	// past it Deliver drops, as Raft tolerates (64 MiB).
	MaxInboxBytes int
	// Logger (nil: slog.Default).
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.TickInterval <= 0 {
		c.TickInterval = 100 * time.Millisecond
	}
	if c.ElectionTicks <= 0 {
		c.ElectionTicks = 10
	}
	if c.HeartbeatTicks <= 0 {
		c.HeartbeatTicks = 1
	}
	if c.LivenessTicks <= 0 {
		c.LivenessTicks = max(c.ElectionTicks/2, c.HeartbeatTicks+1)
	}
	if c.MaxSizePerMsg == 0 {
		c.MaxSizePerMsg = 1 << 20
	}
	if c.MaxInflightMsgs <= 0 {
		c.MaxInflightMsgs = 256
	}
	if c.MaxUncommittedBytes == 0 {
		c.MaxUncommittedBytes = 64 << 20
	}
	if c.SyncWorkers <= 0 {
		c.SyncWorkers = 16
	}
	if c.SyncRounds <= 0 {
		c.SyncRounds = 4
	}
	if c.MaxInboxBytes <= 0 {
		c.MaxInboxBytes = 64 << 20
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Errors of a host and its groups.
var (
	// ErrNotLeader: a proposal to a group this node does not lead (or
	// leads but is not ready for yet).
	ErrNotLeader = errors.New("raft: not the leader")
	// ErrRemoved: the group was removed from the host, or the host closed.
	ErrRemoved = errors.New("raft: group removed")
	// ErrGroupExists: AddGroup of a group the host has.
	ErrGroupExists = errors.New("raft: group already hosted")
	// ErrUnreachable: a Call or Forward waiting on a node this host took
	// for down, or (a call; a forward is sent again) whose connection
	// broke before it answered; at once, one to a node the transport has
	// no connection to since one broke. The node may have handled what it
	// was sent; the caller may try again, there or elsewhere.
	ErrUnreachable = errors.New("raft: the node cannot be reached")
)

// Host runs every Raft group of one node in one loop (the package doc
// describes it). Start runs the loop in the background; a deterministic
// test drives it instead through Tick, Process and Synced.
type Host struct {
	cfg    Config
	logger *slog.Logger
	// incarnation tells this run of the host, and the replicas it has
	// reopened so far, from earlier ones in its peers' eyes: drawn at
	// start, moved on by AddGroup for a replica with a Raft state
	// (quiesce.go). Odd, so never 0.
	incarnation atomic.Uint64

	mu          sync.Mutex // guards the fields below it, and every Group's quiesced
	groups      map[uint64]*Group
	active      map[uint64]*Group // groups that tick: not quiesced
	dirty       map[uint64]*Group // groups with something to process
	inbox       []inbound
	inboxBytes  int
	senders     map[senderKey]bool         // snapshot senders running
	forwards    map[uint64]*pendingRequest // Forward and Call calls waiting, by request id
	nextForward uint64
	taken       forwardMemory // forwards taken as a leader (forward.go)
	awake       AwakeClock    // what taken ages on
	// links counts the transport's open connections to each peer it
	// reported (Connected, Disconnected): a peer at 0 has none.
	links  map[uint64]int
	closed bool
	wake   chan struct{} // the loop has work; capacity 1

	// Owned by the loop (Tick, Process, Synced).
	ticks        int64
	peers        map[uint64]*peer
	peersStale   bool                  // group memberships changed: recompute peers
	outbox       map[uint64][]Envelope // by destination, sent at the end of a step
	writers      map[uint64]*Group     // groups with appends to write
	rounds       syncRounds
	tickDeadline time.Time
	// silent is the peers taken for down, published for PeerUp.
	silent atomic.Pointer[map[uint64]bool]
	// tickedAt is when the loop last ticked (Unix ns), for alive.
	tickedAt atomic.Int64

	// Background work: the loop, sync rounds, snapshot senders.
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	syncDone chan *SyncBatch // capacity SyncRounds: a round never waits to report
	stop     chan struct{}
}

// inbound is a batch of envelopes from one peer, or the news that a
// connection to it broke (broke), which concerns the requests up to id
// brokeUpTo: those registered later were queued for the next one.
type inbound struct {
	from      uint64
	envs      []Envelope
	broke     bool
	brokeUpTo uint64
}

// peer is the liveness of a node the host shares groups with.
type peer struct {
	lastHeard   int64 // tick
	down        bool
	incarnation uint64 // what its pings carry; 0 until one arrives
}

type senderKey struct{ group, to uint64 }

// NewHost returns a host with no groups; Start runs it.
func NewHost(cfg Config) (*Host, error) {
	if cfg.NodeID == 0 {
		return nil, errors.New("raft: node id 0")
	}
	cfg = cfg.withDefaults()
	if cfg.ElectionTicks <= cfg.HeartbeatTicks {
		return nil, fmt.Errorf("raft: election timeout of %d ticks is not above the heartbeat interval of %d", cfg.ElectionTicks, cfg.HeartbeatTicks)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &Host{
		cfg:      cfg,
		logger:   cfg.Logger.With("node", cfg.NodeID),
		groups:   map[uint64]*Group{},
		active:   map[uint64]*Group{},
		dirty:    map[uint64]*Group{},
		senders:  map[senderKey]bool{},
		forwards: map[uint64]*pendingRequest{},
		links:    map[uint64]int{},
		wake:     make(chan struct{}, 1),
		peers:    map[uint64]*peer{},
		outbox:   map[uint64][]Envelope{},
		writers:  map[uint64]*Group{},
		ctx:      ctx,
		cancel:   cancel,
		syncDone: make(chan *SyncBatch, cfg.SyncRounds),
		stop:     make(chan struct{}),
	}
	h.incarnation.Store(rand.Uint64() | 1) // never 0, which a peer takes for "none seen"
	// Request ids unique across runs: a leader remembers the forwards it
	// took by their sender and id, and must not take a restarted node's
	// new one for an old one (forward.go). Far from wrapping.
	h.nextForward = rand.Uint64() >> 2
	return h, nil
}

// NodeID is the node the host runs for.
func (h *Host) NodeID() uint64 { return h.cfg.NodeID }

// Start runs the loop in the background until Close: a tick every
// TickInterval, a step whenever there is work, a sync round whenever the
// last one is done and something was written.
func (h *Host) Start() {
	h.wg.Add(1)
	go h.run()
}

func (h *Host) run() {
	defer h.wg.Done()
	ticker := time.NewTicker(h.cfg.TickInterval)
	defer ticker.Stop()
	for {
		select {
		case <-h.stop:
			for range h.rounds.running() {
				<-h.syncDone // let the rounds in flight finish before replicas close
			}
			return
		case <-ticker.C:
			h.Tick()
		case <-h.wake:
		case b := <-h.syncDone:
			h.Synced(b)
		}
		if b := h.Process(); b != nil {
			h.wg.Add(1)
			go func() {
				defer h.wg.Done()
				b.Run(h.cfg.SyncWorkers)
				h.syncDone <- b
			}()
		}
	}
}

// Close stops the loop and the snapshot senders; the groups' replicas
// are their owners' to close (after Close, or after RemoveGroup).
func (h *Host) Close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	h.mu.Unlock()
	close(h.stop)
	h.cancel()
	h.wg.Wait()
}

// Deliver hands the host a batch of envelopes from node from: a
// transport calls it, from any goroutine. It only queues them, or drops
// them if MaxInboxBytes wait already.
func (h *Host) Deliver(from uint64, envs []Envelope) {
	size := 0
	for i := range envs {
		size += envs[i].size()
	}
	h.mu.Lock()
	if !h.closed && h.inboxBytes+size <= h.cfg.MaxInboxBytes {
		h.inbox = append(h.inbox, inbound{from: from, envs: envs})
		h.inboxBytes += size
	}
	h.mu.Unlock()
	h.signal()
}

// Connected tells the host that a connection to node from opened: a
// transport calls it before delivering what arrives on it.
func (h *Host) Connected(from uint64) {
	h.mu.Lock()
	h.links[from]++
	h.mu.Unlock()
}

// Disconnected tells the host that a connection to node from broke: a
// transport calls it after delivering the last batch read from that
// connection. It is news for the loop, in order with those batches: an
// answer that arrived before the break is taken first.
func (h *Host) Disconnected(from uint64) {
	h.mu.Lock()
	h.links[from] = max(h.links[from]-1, 0)
	if !h.closed {
		h.inbox = append(h.inbox, inbound{from: from, broke: true, brokeUpTo: h.nextForward})
	}
	h.mu.Unlock()
	h.signal()
}

func (h *Host) signal() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// AddGroup starts hosting group id with its replica: it campaigns, takes
// messages and ticks from now on. The replica's initial state (its
// configuration, for a new group) decides its members.
func (h *Host) AddGroup(id uint64, rep Replica) (*Group, error) {
	hs, cs, err := rep.InitialState()
	if err != nil {
		return nil, err
	}
	cache := &entryCache{Replica: rep}
	rep = cache
	rn, err := etcdraft.NewRawNode(&etcdraft.Config{
		ID:                        h.cfg.NodeID,
		ElectionTick:              h.cfg.ElectionTicks,
		HeartbeatTick:             h.cfg.HeartbeatTicks,
		Storage:                   rep,
		Applied:                   rep.Applied(),
		AsyncStorageWrites:        true,
		MaxSizePerMsg:             h.cfg.MaxSizePerMsg,
		MaxInflightMsgs:           h.cfg.MaxInflightMsgs,
		MaxUncommittedEntriesSize: h.cfg.MaxUncommittedBytes,
		CheckQuorum:               true,
		PreVote:                   true,
		DisableProposalForwarding: true,
		StepDownOnRemoval:         true,
		Logger:                    raftLogger{h.logger.With("group", id)},
	})
	if err != nil {
		return nil, err
	}
	g := &Group{id: id, h: h, rep: rep, cache: cache, rn: rn, members: membersOf(cs)}
	g.setStatus(Status{ID: id, Term: hs.GetTerm()})

	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrRemoved
	}
	if _, ok := h.groups[id]; ok {
		return nil, fmt.Errorf("%w: %d", ErrGroupExists, id)
	}
	h.groups[id] = g
	h.active[id] = g
	h.dirty[id] = g
	h.peersStale = true
	if hs.GetTerm() > 0 {
		// A replica reopened, here after a restart, maybe long after the
		// first ping: its leader may have quiesced since (quiesce.go).
		h.incarnation.Add(2)
	}
	h.signal()
	return g, nil
}

// RemoveGroup stops hosting group id: nothing reaches its replica from
// the host once it returns (a sync round in flight still finishes its
// fsync). Its pending proposals are not committed here.
func (h *Host) RemoveGroup(id uint64) {
	h.mu.Lock()
	g := h.groups[id]
	delete(h.groups, id)
	delete(h.active, id)
	delete(h.dirty, id)
	h.peersStale = true
	h.mu.Unlock()
	if g == nil {
		return
	}
	g.mu.Lock()
	g.removed = true
	g.mu.Unlock()
}

// markDirty queues g for the next Process; wake also makes it tick again
// if it was quiesced. Caller may hold g.mu.
func (h *Host) markDirty(g *Group, wake bool) {
	h.mu.Lock()
	if h.groups[g.id] == g {
		h.dirty[g.id] = g
		if wake && g.quiesced {
			g.quiesced = false
			h.active[g.id] = g
		}
	}
	h.mu.Unlock()
	h.signal()
}

// Process does everything pending but ticking: it steps the envelopes
// received into their groups, handles every group's Ready (sending its
// messages, applying what it committed, queueing what it must store), and
// unless SyncRounds rounds are in flight writes what the groups must store
// and returns the sync round that makes it durable (nil if there is none).
// The caller runs the round and hands it to Synced.
func (h *Host) Process() *SyncBatch {
	h.mu.Lock()
	inbox := h.inbox
	h.inbox, h.inboxBytes = nil, 0
	h.mu.Unlock()
	for _, in := range inbox {
		h.receive(in)
	}
	for _, g := range h.takeDirty() {
		g.mu.Lock()
		if !g.removed {
			h.handleReady(g)
		}
		g.mu.Unlock()
	}
	// The peers get their messages before this node writes: a leader's
	// entries reach its followers without waiting for its own writes.
	h.flush()
	return h.writeRound()
}

// takeDirty empties the dirty set, in group order.
func (h *Host) takeDirty() []*Group {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.dirty) == 0 {
		return nil
	}
	ids := slices.Sorted(maps.Keys(h.dirty))
	gs := make([]*Group, len(ids))
	for i, id := range ids {
		gs[i] = h.dirty[id]
	}
	clear(h.dirty)
	return gs
}

// group returns the hosted group id, nil if there is none.
func (h *Host) group(id uint64) *Group {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.groups[id]
}

// Groups lists the groups the host runs, in id order.
func (h *Host) Groups() []*Group {
	h.mu.Lock()
	defer h.mu.Unlock()
	gs := make([]*Group, 0, len(h.groups))
	for _, id := range slices.Sorted(maps.Keys(h.groups)) {
		gs = append(gs, h.groups[id])
	}
	return gs
}

// receive steps one inbound batch.
func (h *Host) receive(in inbound) {
	if in.broke {
		h.connectionBroke(in.from, in.brokeUpTo)
		return
	}
	h.heard(in.from)
	for i := range in.envs {
		e := &in.envs[i]
		switch e.Kind {
		case KindPing:
			h.pinged(in.from, e.Index)
			continue
		case KindForwardReply, KindCallReply:
			h.forwardAnswered(e)
			continue
		}
		g := h.group(e.Group)
		if g == nil {
			continue // not (or no longer) hosted here
		}
		g.mu.Lock()
		if !g.removed && g.failed == nil {
			h.receiveFor(g, in.from, e)
		}
		g.mu.Unlock()
	}
}

// receiveFor handles an envelope for g. Caller holds g.mu.
func (h *Host) receiveFor(g *Group, from uint64, e *Envelope) {
	switch e.Kind {
	case KindRaft:
		h.stepRemote(g, from, e.Msg)
	case KindQuiesce:
		h.followerQuiesce(g, from, e.Term, e.Index)
	case KindSnapshotRequest:
		h.startSnapshotSender(g, from, e)
	case KindSnapshotChunk:
		if err := g.rep.StageSnapshot(e.Index, e.Term, e.Offset, e.Data); err != nil {
			h.logger.Warn("staging a snapshot chunk failed", "group", g.id, "err", err)
		}
	case KindForward:
		h.forwarded(g, from, e)
	case KindCall:
		h.called(g, from, e)
	}
}

// stepRemote steps a Raft message from another node into g. Caller holds
// g.mu.
func (h *Host) stepRemote(g *Group, from uint64, m *pb.Message) {
	if m.GetType() == pb.MsgSnap && !h.snapshotStaged(g, from, m) {
		return
	}
	if err := g.rn.Step(m); err != nil && !errors.Is(err, etcdraft.ErrStepPeerNotFound) {
		h.logger.Debug("step failed", "group", g.id, "type", m.GetType(), "err", err)
	}
	// A heartbeat response only confirms what a quiesced leader knows.
	h.markDirty(g, m.GetType() != pb.MsgHeartbeatResp)
}

// handleReady routes everything g's Raft has ready: messages to peers go
// to the outbox, appends to the write queue, committed entries are
// applied at once. Caller holds g.mu.
func (h *Host) handleReady(g *Group) {
	for g.failed == nil && g.rn.HasReady() {
		rd := g.rn.Ready()
		if rd.SoftState != nil || rd.HardState != nil {
			h.updateStatus(g)
		}
		if rd.HardState != nil {
			g.commit = rd.HardState.GetCommit()
		}
		for _, m := range rd.Messages {
			switch m.GetTo() {
			case etcdraft.LocalAppendThread:
				g.appends = append(g.appends, newPendingAppend(m))
				h.writers[g.id] = g
			case etcdraft.LocalApplyThread:
				h.apply(g, m)
			default:
				h.send(m.GetTo(), Envelope{Kind: KindRaft, Group: g.id, Msg: m})
				if m.GetType() == pb.MsgSnap {
					h.snapshotOffered(g, m)
				}
			}
		}
	}
	h.leaderCommitted(g)
	h.retainForFollowers(g)
}

// retainForFollowers tells g's entry cache the first entry a follower
// still lacks, on a leader: the entries it applied from there on stay in
// memory, sent from there rather than read back from the log. Only
// followers that are up and take appends as they come (StateReplicate)
// count: one that is down, probing or getting a snapshot would have the
// cache keep its whole bound for nothing. Caller holds g.mu.
func (h *Host) retainForFollowers(g *Group) {
	var need uint64 // 0: none
	if g.status.Role == etcdraft.StateLeader {
		g.rn.WithProgress(func(id uint64, _ etcdraft.ProgressType, pr tracker.Progress) {
			if id != h.cfg.NodeID && pr.State == tracker.StateReplicate && h.PeerUp(id) && (need == 0 || pr.Match+1 < need) {
				need = pr.Match + 1
			}
		})
	}
	g.cache.retainFrom(need)
}

// leaderCommitted tells the replica of a group this node leads how far
// its entries are committed and written here: an acknowledgement waits
// for a majority's fsyncs, not for this node's (the leader's own may come
// after two followers'). Entries from the first one still queued on are
// not: the written ones at those indexes may be a deposed leader's, which
// the queued ones (written to this node as a follower, before it led) are
// about to replace. Caller holds g.mu.
func (h *Host) leaderCommitted(g *Group) {
	if g.status.Role != etcdraft.StateLeader {
		return
	}
	upTo := g.commit
	for _, pa := range g.appends {
		if !etcdraft.IsEmptySnap(pa.w.Snapshot) {
			return
		}
		if len(pa.w.Entries) > 0 {
			upTo = min(upTo, pa.w.Entries[0].GetIndex()-1)
			break
		}
	}
	if upTo <= g.toldCommit {
		return
	}
	g.toldCommit = upTo
	g.rep.Committed(upTo)
}

// updateStatus publishes g's state after Raft changed it. Caller holds
// g.mu.
func (h *Host) updateStatus(g *Group) {
	bs := g.rn.BasicStatus()
	s := Status{ID: g.id, Term: bs.GetTerm(), Leader: bs.Lead, Role: bs.RaftState}
	s.Ready = s.Role == etcdraft.StateLeader && g.appliedTerm == s.Term
	if s == g.status {
		return
	}
	g.setStatus(s)
	g.rep.StateChanged(s)
}

// apply applies the committed entries of a MsgStorageApply and steps its
// responses. Caller holds g.mu.
func (h *Host) apply(g *Group, m *pb.Message) {
	for _, e := range m.GetEntries() {
		cs, err := h.applyConfChange(g, e)
		if err == nil {
			err = g.rep.Apply(e, cs)
		}
		if err != nil {
			h.fail(g, fmt.Errorf("apply entry %d: %w", e.GetIndex(), err))
			return
		}
		if g.appliedTerm != e.GetTerm() {
			g.appliedTerm = e.GetTerm()
			h.updateStatus(g) // a leader is ready once it applied an entry of its term
		}
	}
	for _, r := range m.GetResponses() {
		h.deliverLocal(g, r)
	}
}

// applyConfChange applies e to g's Raft if it is a membership change and
// returns the configuration it leads to (nil for other entries).
func (h *Host) applyConfChange(g *Group, e *pb.Entry) (*pb.ConfState, error) {
	cc, err := confChangeOf(e)
	if cc == nil || err != nil {
		return nil, err
	}
	cs := g.rn.ApplyConfChange(cc)
	g.members = membersOf(cs)
	h.mu.Lock()
	h.peersStale = true
	h.mu.Unlock()
	return cs, nil
}

// deliverLocal hands a response Raft attached to a local write to its
// target: this node's Raft, or a peer. Caller holds g.mu.
func (h *Host) deliverLocal(g *Group, m *pb.Message) {
	if m.GetTo() != h.cfg.NodeID {
		h.send(m.GetTo(), Envelope{Kind: KindRaft, Group: g.id, Msg: m})
		return
	}
	if err := g.rn.Step(m); err != nil {
		h.logger.Debug("local step failed", "group", g.id, "type", m.GetType(), "err", err)
	}
	h.markDirty(g, false)
}

// fail takes g out of service after its replica failed: it is not stepped,
// ticked or written any more, and says it has no leader. Caller holds g.mu.
func (h *Host) fail(g *Group, err error) {
	if g.failed != nil {
		return
	}
	g.failed = err
	h.logger.Error("raft group failed; it is out of service until it is opened again", "group", g.id, "err", err)
	g.setStatus(Status{ID: g.id, Term: g.status.Term})
	g.rep.StateChanged(g.status)
	h.mu.Lock()
	delete(h.active, g.id)
	h.mu.Unlock()
}

// send queues an envelope for node to; flush sends the queues.
func (h *Host) send(to uint64, e Envelope) {
	h.outbox[to] = append(h.outbox[to], e)
}

// flush hands every destination its batch, in node order.
func (h *Host) flush() {
	if len(h.outbox) == 0 {
		return
	}
	for _, to := range slices.Sorted(maps.Keys(h.outbox)) {
		if h.cfg.Transport != nil {
			h.cfg.Transport.Send(to, h.outbox[to])
		}
		delete(h.outbox, to)
	}
}

// confChangeOf decodes a membership change entry; nil for other entries.
func confChangeOf(e *pb.Entry) (pb.ConfChangeI, error) {
	switch e.GetType() {
	case pb.EntryConfChange:
		cc := &pb.ConfChange{}
		return cc, unmarshal(e.GetData(), cc)
	case pb.EntryConfChangeV2:
		cc := &pb.ConfChangeV2{}
		return cc, unmarshal(e.GetData(), cc)
	}
	return nil, nil
}

// membersOf lists the voters and learners of a configuration, both
// halves of a joint one.
func membersOf(cs *pb.ConfState) []uint64 {
	ids := slices.Concat(cs.GetVoters(), cs.GetVotersOutgoing(), cs.GetLearners(), cs.GetLearnersNext())
	slices.Sort(ids)
	return slices.Compact(ids)
}
