package raft

import (
	"cmp"
	"maps"
	"slices"
	"time"

	etcdraft "go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/tracker"
)

// Ticks, quiescence and liveness.
//
// Only active groups tick. A leader whose group has been idle for two
// ticks in a row (every member has every entry, everything committed is
// applied, nothing is queued) quiesces it: it stops ticking and tells the
// followers, which stop too if they follow it in that term and know its
// commit index. A quiesced group costs nothing: no ticks, no heartbeats.
// Anything that needs the group wakes it on the node where it happens: a
// proposal, or any Raft message but a heartbeat response (a message from
// a woken leader or a candidate wakes the others in turn).
//
// What a quiesced follower cannot notice by itself is its leader's death,
// since no heartbeat is missed. The host notices instead: every host pings
// each of its peers every heartbeat interval, one envelope per node pair
// whatever the number of groups, and a peer silent for LivenessTicks is
// down. Then every group that peer is a member of wakes, and the followers
// it led move their election clock on by ElectionTicks-1, so they campaign
// within one more randomized timeout: a dead leader is replaced about as
// fast as in an active group.
//
// Nor can a quiesced leader notice that a follower restarted: the
// follower knows only the commit index it saved at its last change of
// term (the state file keeps the commit as a hint), and waits for a
// heartbeat that does not come; a learner, which never campaigns, waits
// for ever. So every host pings under an incarnation drawn at start, and
// a ping from an incarnation not seen before wakes every group that peer
// is a member of: the leaders' next heartbeats tell it the commit index.
// A restarted node reopens its replicas one after another (a cluster
// node its partitions only once it has replayed the metadata group), and
// pings from its first: a leader woken then heartbeats a replica not open
// yet and quiesces again. So reopening a replica that has a Raft state
// moves the incarnation on too, and its next ping wakes the groups again;
// a leader woken so heartbeats at least once more before it quiesces,
// even if the ping finds the group awake and about to quiesce.

// quiesceAfter is how many idle ticks in a row a leader waits before it
// quiesces its group: one tick's heartbeat has then told every follower
// the final commit index.
const quiesceAfter = 2

// Tick advances the clock one tick: every active group ticks, the leaders
// of idle groups quiesce them, and every HeartbeatTicks the host pings its
// peers and looks for the silent ones.
func (h *Host) Tick() {
	h.tickedAt.Store(time.Now().UnixNano())
	h.ticks++
	for _, g := range h.activeGroups() {
		g.mu.Lock()
		if !g.removed && g.failed == nil && !(g.status.Role == etcdraft.StateLeader && h.leaderTick(g)) {
			g.rn.Tick()
		}
		g.mu.Unlock()
	}
	if h.ticks%int64(h.cfg.HeartbeatTicks) == 0 {
		h.pingPeers()
	}
	h.checkLiveness()
	h.flush()
}

// activeGroups returns the groups that tick, in group order, and marks
// them dirty (a tick may make messages).
func (h *Host) activeGroups() []*Group {
	h.mu.Lock()
	defer h.mu.Unlock()
	ids := slices.Sorted(maps.Keys(h.active))
	gs := make([]*Group, len(ids))
	for i, id := range ids {
		gs[i] = h.active[id]
		h.dirty[id] = gs[i]
	}
	if len(gs) > 0 {
		h.signal()
	}
	return gs
}

// leaderTick tells the replica of a group this node leads how far its
// followers have come, and quiesces the group (reporting true) if it has
// been idle at quiesceAfter ticks in a row, the last tick's heartbeats
// having told the followers the commit index. Caller holds g.mu.
func (h *Host) leaderTick(g *Group) bool {
	bs := g.rn.BasicStatus()
	matched, idle := h.survey(g, bs.GetCommit())
	g.rep.Matched(matched)
	if !idle || !h.quorumUp(g) || bs.LeadTransferee != 0 || bs.Applied != bs.GetCommit() || len(g.appends) > 0 || g.rn.HasReady() {
		g.idleTicks = 0
		return false
	}
	if g.idleTicks++; g.idleTicks < quiesceAfter {
		return false
	}
	g.idleTicks = 0
	for _, id := range g.members {
		if id != h.cfg.NodeID {
			h.send(id, Envelope{Kind: KindQuiesce, Group: g.id, Term: g.status.Term, Index: bs.GetCommit()})
		}
	}
	h.quiesce(g)
	return true
}

// survey returns, on a leader, how far every member's log matches its
// own, and whether every member has every entry, all of them committed
// (commit) with none in flight. Caller holds g.mu.
func (h *Host) survey(g *Group, commit uint64) (matched uint64, synced bool) {
	matched, synced = commit, true
	g.rn.WithProgress(func(id uint64, _ etcdraft.ProgressType, pr tracker.Progress) {
		matched = min(matched, pr.Match)
		if pr.Match != commit || pr.Next != pr.Match+1 || pr.State != tracker.StateReplicate && id != h.cfg.NodeID {
			synced = false
		}
	})
	return matched, synced
}

// quorumUp reports whether the voters of g this node takes for up (itself
// included) are a majority. A leader cut off with a minority must keep
// ticking: only then does CheckQuorum step it down after an election
// timeout. Quiesced, it would go on saying it leads for as long as the
// partition lasts, and the followers in contact with it would believe it.
// Caller holds g.mu.
func (h *Host) quorumUp(g *Group) bool {
	voters, up := 0, 0
	g.rn.WithProgress(func(id uint64, _ etcdraft.ProgressType, pr tracker.Progress) {
		if pr.IsLearner {
			return
		}
		voters++
		if id == h.cfg.NodeID || h.PeerUp(id) {
			up++
		}
	})
	return up > voters/2
}

// followerQuiesce handles a leader's quiesce notice: g stops ticking if
// this node follows from in term and knows the commit index it was sent.
// Caller holds g.mu.
func (h *Host) followerQuiesce(g *Group, from, term, commit uint64) {
	s := g.status
	if s.Role != etcdraft.StateFollower || s.Leader != from || s.Term != term || len(g.appends) > 0 {
		return
	}
	if bs := g.rn.BasicStatus(); bs.GetCommit() < commit {
		return // the heartbeat with the commit index is lost: keep ticking
	}
	h.quiesce(g)
}

// quiesce stops ticking g. Caller holds g.mu.
func (h *Host) quiesce(g *Group) {
	h.mu.Lock()
	if h.groups[g.id] == g {
		g.quiesced = true
		delete(h.active, g.id)
	}
	h.mu.Unlock()
}

// alive reports whether the loop ticked within the last LivenessTicks-1
// ticks. Its peers take it for down only after LivenessTicks without a
// ping (sent every tick) and elect another leader after that: a leader
// whose loop is stuck longer (a long step, a stopped process) stops
// saying it leads before another may, and says so again once it ticks
// (Raft then has stepped it down, if another was elected).
func (h *Host) alive() bool {
	lease := h.cfg.TickInterval * time.Duration(max(h.cfg.LivenessTicks-1, 1))
	return time.Since(time.Unix(0, h.tickedAt.Load())) < lease
}

// pingPeers sends every peer its liveness ping.
func (h *Host) pingPeers() {
	h.refreshPeers()
	for id := range h.peers {
		h.send(id, Envelope{Kind: KindPing, Index: h.incarnation.Load()})
	}
}

// refreshPeers makes the peer set the members of the hosted groups but
// this node, if memberships changed. A new peer counts as just heard.
func (h *Host) refreshPeers() {
	h.mu.Lock()
	stale := h.peersStale
	h.peersStale = false
	var groups []*Group
	if stale {
		groups = slices.Collect(maps.Values(h.groups))
	}
	h.mu.Unlock()
	if !stale {
		return
	}
	members := map[uint64]bool{}
	for _, g := range groups {
		g.mu.Lock()
		for _, id := range g.members {
			members[id] = true
		}
		g.mu.Unlock()
	}
	delete(members, h.cfg.NodeID)
	for id := range h.peers {
		if !members[id] {
			delete(h.peers, id)
		}
	}
	for id := range members {
		if h.peers[id] == nil {
			h.peers[id] = &peer{lastHeard: h.ticks}
		}
	}
}

// heard notes that peer from is alive.
func (h *Host) heard(from uint64) {
	if p := h.peers[from]; p != nil {
		p.lastHeard = h.ticks
		if p.down {
			p.down = false
			h.publishSilent()
		}
	}
}

// pinged notes the incarnation a peer pings under, and wakes the groups
// it is a member of if that incarnation is new: the peer (re)started, or
// reopened replicas.
func (h *Host) pinged(from, incarnation uint64) {
	p := h.peers[from]
	if p == nil || p.incarnation == incarnation {
		return
	}
	if p.incarnation != 0 {
		h.logger.Info("peer restarted or reopened replicas; waking its groups", "peer", from)
	}
	p.incarnation = incarnation
	h.wakeGroupsOf(from, false)
}

// publishSilent publishes the peers taken for down, for PeerUp.
func (h *Host) publishSilent() {
	silent := map[uint64]bool{}
	for id, p := range h.peers {
		if p.down {
			silent[id] = true
		}
	}
	h.silent.Store(&silent)
}

// PeerUp reports whether node id was heard from lately (within
// LivenessTicks); this node is always up.
func (h *Host) PeerUp(id uint64) bool {
	silent := h.silent.Load()
	return silent == nil || !(*silent)[id]
}

// Reachable reports whether node id is up (PeerUp) and the transport has
// a connection to it, or has reported none yet: a node killed -9 is
// unreachable as soon as its connection breaks, before the failure
// detector takes it for down, and until a new connection opens. Raft's
// own view (PeerUp) waits for the detector: a connection that breaks for
// a moment must not move leaderships.
func (h *Host) Reachable(id uint64) bool {
	if !h.PeerUp(id) {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	n, ok := h.links[id]
	return !ok || n > 0
}

// checkLiveness takes the peers silent for LivenessTicks for down, and
// wakes the groups they are members of.
func (h *Host) checkLiveness() {
	for _, id := range slices.Sorted(maps.Keys(h.peers)) {
		p := h.peers[id]
		if p.down || h.ticks-p.lastHeard <= int64(h.cfg.LivenessTicks) {
			continue
		}
		p.down = true
		h.publishSilent()
		h.logger.Info("peer silent; waking its groups", "peer", id, "ticks", h.ticks-p.lastHeard)
		h.failRequestsTo(id)
		h.wakeGroupsOf(id, true)
	}
}

// wakeGroupsOf wakes every group peer is a member of. If the peer is down
// (leaderDown), the followers it led move their election clock on so
// that they campaign soon.
//
// A leader counts its idle ticks anew: the group may be awake already,
// one idle tick from quiescing, its last heartbeat sent before the peer
// reopened its replica. Woken from that count, it would quiesce at its
// next tick without heartbeating again, and the replica would wait for
// an election timeout (a learner for ever) to learn the commit index.
func (h *Host) wakeGroupsOf(peer uint64, leaderDown bool) {
	h.mu.Lock()
	groups := slices.SortedFunc(maps.Values(h.groups), func(a, b *Group) int { return cmp.Compare(a.id, b.id) })
	h.mu.Unlock()
	for _, g := range groups {
		g.mu.Lock()
		if !g.removed && g.failed == nil && slices.Contains(g.members, peer) {
			if leaderDown && g.status.Leader == peer && g.status.Role == etcdraft.StateFollower {
				for range h.cfg.ElectionTicks - 1 {
					g.rn.Tick()
				}
			}
			g.idleTicks = 0
			h.markDirty(g, true)
		}
		g.mu.Unlock()
	}
}
