package raft

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Forwarding proposals.
//
// Only a group's leader takes proposals. A node that must write to a
// group it follows (the metadata group: a broker registering itself,
// reserving producer ids, creating a topic asked of it) forwards the
// proposal's data to the leader: a KindForward envelope with a request id.
// The leader's host hands the data to the group's ForwardHandler (its
// replica's owner proposes it and waits for the commit) and answers with
// a KindForwardReply of the same id: the offset it got, or the error.
//
// A forward (or a call) waiting on a node fails with ErrUnreachable when
// this host takes the node for down (a caller that will not send to such
// a node checks PeerUp first: see request), and one to a node the
// transport has no connection to since one broke fails at once. When the
// connection to the node breaks, the request or its answer may be lost
// with it: a call fails with ErrUnreachable at once, and a forward is
// sent again under its id, to go on the next connection. The leader
// takes a forward once by its sender and id (forwardMemory): it answers a
// repeat of one it is still proposing when that is done, and one it
// answered with that answer again, for forwardMemoryTime. So a forward
// lost in transit costs the time to reconnect, not the caller's timeout,
// and is applied at most once while its leader lives. A repeat that
// reaches a leader that has restarted since, or the caller's own retries
// (its context ended, or the leadership moved: internal/replica's
// Propose), may still apply it twice: what is forwarded must be safe to
// apply twice.
//
// A copy may arrive late: it waited in the transport's queue while there
// was no connection (written when one opened again, minutes later), or
// in socket buffers. Taken after its leader forgot the first, it would
// be applied twice. So a forward, and a call (a quorum queue's forwarded
// publish rides on one: internal/mq remembers those), expires
// (Envelope.Expires): at its caller's deadline, and requestTTL after it
// was made at the latest. A transport does not send a copy that expired
// in its queue and carries how long it has left, not the time (no clock
// is shared between nodes), stamped as the copy is written; the receiver
// refuses a new one that expired before it got to it, and a broken
// connection fails an expired forward rather than send it again. A
// memory of what was taken then needs to outlast requestTTL, and the
// time a copy spends between being written and being read: the TCP
// transport bounds the time unacknowledged data waits in the network
// (userTimeout), and a memory ages on an AwakeClock, which leaves out
// the time its own process was stopped (frames read from its socket
// buffers once it resumes are not late for it).

// ForwardHandler proposes data forwarded by another node, on the leader,
// and returns once it is committed: the offset it got.
type ForwardHandler func(ctx context.Context, data []byte) (int64, error)

// ErrForwarded is an error the leader answered a forwarded proposal with.
var ErrForwarded = errors.New("raft: the leader refused the forwarded proposal")

// forwardResult is what a KindForwardReply or KindCallReply says.
type forwardResult struct {
	offset int64
	data   []byte // a call's answer
	err    error
}

// SetForwardHandler installs what takes proposals forwarded to g while
// this node leads it.
func (g *Group) SetForwardHandler(fn ForwardHandler) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.forward = fn
}

// Forward sends data to node to, the leader of group, to propose, and
// waits for its answer until ctx ends.
func (h *Host) Forward(ctx context.Context, group, to uint64, data []byte) (int64, error) {
	r := h.request(ctx, KindForward, group, to, data)
	return r.offset, r.err
}

// pendingRequest is a Forward or Call waiting for its answer.
type pendingRequest struct {
	to   uint64
	env  Envelope // what was sent, sent again if a forward's connection breaks
	done chan forwardResult
}

// complete hands r to the caller waiting, unless it has an answer
// already.
func (p *pendingRequest) complete(r forwardResult) {
	select {
	case p.done <- r:
	default:
	}
}

// request sends data to node to in an envelope of kind (KindForward or
// KindCall) and waits for its reply until ctx ends, or until node to is
// taken for down or (a call) its connection breaks: ErrUnreachable. It
// fails at once while the transport has no connection to node to since
// one broke (a node killed -9: the dialer's attempts are refused),
// rather than queue the request for the next connection, but sends to a
// node taken for down: a node may answer without pinging this one (a
// node removed from the cluster, restarted, asks the others whether it
// was, and they no longer take it for a peer).
func (h *Host) request(ctx context.Context, kind Kind, group, to uint64, data []byte) forwardResult {
	if h.cfg.Transport == nil {
		return forwardResult{offset: -1, err: fmt.Errorf("raft: no transport to reach node %d", to)}
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return forwardResult{offset: -1, err: ErrRemoved}
	}
	if n, ok := h.links[to]; ok && n == 0 {
		h.mu.Unlock()
		return forwardResult{offset: -1, err: unreachable(to, "has no connection")}
	}
	h.nextForward++
	id := h.nextForward
	expires := time.Now().Add(requestTTL)
	if d, ok := ctx.Deadline(); ok && d.Before(expires) {
		expires = d // no one waits for its answer after that
	}
	req := &pendingRequest{to: to, env: Envelope{Kind: kind, Group: group, Index: id, Data: data, Expires: expires}, done: make(chan forwardResult, 1)}
	h.forwards[id] = req
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.forwards, id)
		h.mu.Unlock()
	}()
	h.cfg.Transport.Send(to, []Envelope{req.env})
	select {
	case r := <-req.done:
		return r
	case <-ctx.Done():
		return forwardResult{offset: -1, err: ctx.Err()}
	case <-h.ctx.Done():
		return forwardResult{offset: -1, err: ErrRemoved}
	}
}

// unreachable is ErrUnreachable for node, saying why.
func unreachable(node uint64, why string) error {
	return fmt.Errorf("%w: node %d %s", ErrUnreachable, node, why)
}

// connectionBroke handles the news that a connection to peer broke, which
// concerns the requests up to id upTo: the calls waiting on it fail, the
// forwards are sent again (the leader takes each once), queued for the
// next connection, but those expired, which fail too: the leader would
// refuse them. Run by the loop.
func (h *Host) connectionBroke(peer, upTo uint64) {
	var again []Envelope
	now := time.Now()
	h.mu.Lock()
	for id, req := range h.forwards {
		switch {
		case req.to != peer || id > upTo:
		case req.env.Kind == KindForward && !expired(&req.env, now):
			again = append(again, req.env)
		default:
			req.complete(forwardResult{offset: -1, err: unreachable(peer, "lost its connection before it answered")})
		}
	}
	h.mu.Unlock()
	if len(again) == 0 {
		return
	}
	slices.SortFunc(again, func(a, b Envelope) int { return cmp.Compare(a.Index, b.Index) })
	h.logger.Debug("the connection to a peer broke; forwarding again", "peer", peer, "forwards", len(again))
	for _, e := range again {
		h.send(peer, e)
	}
}

// failRequestsTo fails every request waiting on peer, just taken for down.
func (h *Host) failRequestsTo(peer uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, req := range h.forwards {
		if req.to == peer {
			req.complete(forwardResult{offset: -1, err: unreachable(peer, "is down")})
		}
	}
}

// forwarded proposes what node from forwarded to g, in the background,
// and answers it, once for each request id (forwardMemory). Caller holds
// g.mu.
func (h *Host) forwarded(g *Group, from uint64, e *Envelope) {
	reply := Envelope{Kind: KindForwardReply, Group: g.id, Index: e.Index}
	fn := g.forward
	if fn == nil || h.cfg.Transport == nil {
		h.answer(from, reply, "no forwarded proposals taken for this group", nil, nil) // nothing proposed: no need to remember
		return
	}
	key := forwardKey{from: from, id: e.Index}
	now := time.Now()
	late := expired(e, now)
	h.mu.Lock()
	known, answered := h.taken.take(key, h.awake.Read(now), late)
	h.mu.Unlock()
	switch {
	case known && answered != nil: // its answer was lost
		h.send(from, *answered)
		return
	case known: // the first is still being proposed, and answers when done
		return
	case late:
		h.answer(from, reply, ErrLate.Error(), nil, nil)
		return
	}
	h.answer(from, reply, "", func(ctx context.Context) (int64, []byte, error) {
		offset, err := fn(ctx, e.Data)
		return offset, nil, err
	}, func(r Envelope) {
		h.mu.Lock()
		h.taken.answered(key, r, h.awake.Read(time.Now()))
		h.mu.Unlock()
	})
}

// requestTTL is how long a forward or a call may be taken after it was
// made, at most (its caller's deadline may come sooner): well within
// forwardMemoryTime, with room for the time a copy spends between being
// written and being read (up to userTimeout in the network).
const requestTTL = 20 * time.Second

// ErrLate answers a forward or a call that arrived expired: it was not
// taken (a copy taken before is answered with its first answer, not
// this), so its caller may send it again as a new one.
var ErrLate = errors.New("raft: the request arrived after it expired, and was not taken")

// expired reports whether e, a forward or a call, expired by now.
func expired(e *Envelope, now time.Time) bool { return !now.Before(e.Expires) }

// answer runs handle in the background and sends node from its result in
// reply (a KindForwardReply or KindCallReply naming the request): the
// offset and data, or Offset -1 and the error's text, which it hands to
// answered first, if not nil. Without a handle it answers refusal at
// once. Caller holds the group's mu.
func (h *Host) answer(from uint64, reply Envelope, refusal string, handle func(context.Context) (int64, []byte, error), answered func(Envelope)) {
	if handle == nil || h.cfg.Transport == nil {
		reply.Offset, reply.Data = -1, []byte(refusal)
		h.send(from, reply)
		return
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		offset, data, err := handle(h.ctx)
		if err != nil {
			offset, data = -1, []byte(err.Error())
		}
		reply.Offset, reply.Data = offset, data
		if answered != nil {
			answered(reply)
		}
		h.cfg.Transport.Send(from, []Envelope{reply})
	}()
}

// forwardMemoryTime is how long a leader remembers its answer to a
// forward, for a repeat (on its AwakeClock): a forward is sent again as
// soon as its connection breaks, while it has not expired (requestTTL).
const forwardMemoryTime = time.Minute

// forwardMemoryMax bounds how many answered forwards a leader
// remembers: past it the oldest answers are forgotten, but not before
// forwardMemoryMin. The forwards still being proposed are all
// remembered, outside the bound: each is a proposal in flight (a
// goroutine waiting on its commit), and forgetting one would take a
// repeat of it as new, proposing it twice.
const forwardMemoryMax = 1 << 16

// forwardMemoryMin is how long a leader remembers its answer to a
// forward however many it answered since: a repeat may be read until
// requestTTL after the forward was made, plus the time it spends
// between being written and being read (the TCP transport's write
// deadline and userTimeout, as long), and one read before it expired
// but after its answer was forgotten would be taken again. Forgotten
// sooner for the bound, the answers of more than forwardMemoryMax
// forwards within forwardMemoryMin (some 1,600 a second) let a repeat
// apply twice; the bound gives way instead, to memory for as many
// forwards as come in forwardMemoryMin.
const forwardMemoryMin = requestTTL + 2*userTimeout

// forwardKey names a forward: its sender and request id.
type forwardKey struct{ from, id uint64 }

// forwardMemory is the forwards a leader took: those being proposed, and
// those answered, with their answers. Guarded by the host's mu.
type forwardMemory struct {
	byKey map[forwardKey]*takenForward
	order []forwardKey // the answered ones, in the order answered: the oldest are forgotten first
}

type takenForward struct {
	answer *Envelope     // nil while it is being proposed
	at     time.Duration // when answered, on the host's AwakeClock
}

// take reports whether key was taken already (known), with the answer
// sent for it (nil while it is being proposed); a new one is remembered
// as taken, unless it is late (not taken). It forgets, first, the
// answers older than forwardMemoryTime at now (the host's AwakeClock),
// and the oldest past forwardMemoryMax older than forwardMemoryMin.
func (m *forwardMemory) take(key forwardKey, now time.Duration, late bool) (known bool, answered *Envelope) {
	for len(m.order) > 0 {
		age := now - m.byKey[m.order[0]].at
		if age < forwardMemoryTime && (len(m.order) < forwardMemoryMax || age < forwardMemoryMin) {
			break
		}
		delete(m.byKey, m.order[0])
		m.order = m.order[1:]
	}
	if t, ok := m.byKey[key]; ok {
		return true, t.answer
	}
	if late {
		return false, nil
	}
	if m.byKey == nil {
		m.byKey = map[forwardKey]*takenForward{}
	}
	m.byKey[key] = &takenForward{}
	return false, nil
}

// answered remembers the answer sent for key, at now.
func (m *forwardMemory) answered(key forwardKey, answer Envelope, now time.Duration) {
	if t := m.byKey[key]; t != nil {
		t.answer, t.at = &answer, now
		m.order = append(m.order, key)
	}
}

// AwakeClock measures how long its process has been running, leaving
// out the time it was stopped (SIGSTOP, a paused machine) or stalled: a
// memory of the requests taken ages on it, so that the copies a stopped
// receiver finds in its socket buffers when it resumes, however long
// after they were written, still meet the memory of what it took before
// it stopped. Each reading adds the time since the last one, but at most
// maxAwakeStep: readings further apart (a stall, or a quiet spell) count
// that much, so the clock runs slow, never fast, and a memory on it
// forgets late, never early. Its zero value is ready; not safe for
// concurrent use.
type AwakeClock struct {
	last  time.Time
	awake time.Duration
}

// maxAwakeStep is the most one reading of an AwakeClock adds: a process
// stopped for longer is stopped for this long as far as its memories of
// requests go.
const maxAwakeStep = time.Second

// Read returns how long the process has been awake at now, as c saw it.
func (c *AwakeClock) Read(now time.Time) time.Duration {
	if !c.last.IsZero() {
		c.awake += min(max(now.Sub(c.last), 0), maxAwakeStep)
	}
	c.last = now
	return c.awake
}

// forwardAnswered completes the Forward or Call waiting for e's request
// id.
func (h *Host) forwardAnswered(e *Envelope) {
	h.mu.Lock()
	req := h.forwards[e.Index]
	h.mu.Unlock()
	if req == nil {
		return // given up on, or answered already (a duplicate)
	}
	r := forwardResult{offset: e.Offset}
	switch {
	case e.Offset < 0 && e.Kind == KindCallReply:
		r.err = fmt.Errorf("%w: %s", ErrCallFailed, e.Data)
	case e.Offset < 0:
		r.err = fmt.Errorf("%w: %s", ErrForwarded, e.Data)
	case e.Kind == KindCallReply:
		r.data = e.Data
	}
	req.complete(r)
}
