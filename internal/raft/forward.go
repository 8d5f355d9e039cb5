package raft

import (
	"context"
	"errors"
	"fmt"
)

// Forwarding proposals.
//
// Only a group's leader takes proposals. A node that must write to a
// group it follows (the metadata group: a broker registering itself,
// reserving producer ids, creating a topic asked of it) forwards the
// proposal's data to the leader: a KindForward envelope with a request id.
// The leader's host hands the data to the group's ForwardHandler (its
// replica's owner proposes it and waits for the commit) and answers with
// a KindForwardReply of the same id: the offset it got, or the error. A
// lost request or reply is the caller's context running out; the caller
// may forward again, so what it forwards must be safe to apply twice.

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

// request sends data to node to in an envelope of kind (KindForward or
// KindCall) and waits for its reply until ctx ends.
func (h *Host) request(ctx context.Context, kind Kind, group, to uint64, data []byte) forwardResult {
	if h.cfg.Transport == nil {
		return forwardResult{offset: -1, err: fmt.Errorf("raft: no transport to reach node %d", to)}
	}
	done := make(chan forwardResult, 1)
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return forwardResult{offset: -1, err: ErrRemoved}
	}
	h.nextForward++
	id := h.nextForward
	h.forwards[id] = done
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.forwards, id)
		h.mu.Unlock()
	}()
	h.cfg.Transport.Send(to, []Envelope{{Kind: kind, Group: group, Index: id, Data: data}})
	select {
	case r := <-done:
		return r
	case <-ctx.Done():
		return forwardResult{offset: -1, err: ctx.Err()}
	case <-h.ctx.Done():
		return forwardResult{offset: -1, err: ErrRemoved}
	}
}

// forwarded proposes what node from forwarded to g, in the background,
// and answers it. Caller holds g.mu.
func (h *Host) forwarded(g *Group, from uint64, e *Envelope) {
	var handle func(context.Context) (int64, []byte, error)
	if fn := g.forward; fn != nil {
		handle = func(ctx context.Context) (int64, []byte, error) {
			offset, err := fn(ctx, e.Data)
			return offset, nil, err
		}
	}
	h.answer(from, Envelope{Kind: KindForwardReply, Group: g.id, Index: e.Index}, "no forwarded proposals taken for this group", handle)
}

// answer runs handle in the background and sends node from its result in
// reply (a KindForwardReply or KindCallReply naming the request): the
// offset and data, or Offset -1 and the error's text. Without a handle it
// answers refusal at once. Caller holds the group's mu.
func (h *Host) answer(from uint64, reply Envelope, refusal string, handle func(context.Context) (int64, []byte, error)) {
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
		h.cfg.Transport.Send(from, []Envelope{reply})
	}()
}

// forwardAnswered completes the Forward or Call waiting for e's request
// id.
func (h *Host) forwardAnswered(e *Envelope) {
	h.mu.Lock()
	done := h.forwards[e.Index]
	h.mu.Unlock()
	if done == nil {
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
	select {
	case done <- r:
	default:
	}
}
