package raft

import (
	"context"
	"errors"
	"time"
)

// Calls between the owners of a group's replicas.
//
// A forward (forward.go) proposes data on the leader and answers with an
// offset. A call carries any request to the owner of the group's replica
// on the node it is sent to (a quorum queue's, whose consumers on other
// nodes pull deliveries and settle them through it) and answers with any
// data: a KindCall envelope with a request id, answered by a
// KindCallReply of the same id. A node that does not host the group drops
// the call: the caller's context runs out. A call waiting on a node taken
// for down, or whose connection broke, fails with ErrUnreachable then
// (forward.go), and is not sent again: the caller may, so what it sends
// must be safe to handle twice. A call expires as a forward does: one
// that arrives expired is refused, not handled (forward.go).

// CallHandler answers a call another node (from) made to g on this node.
type CallHandler func(ctx context.Context, from uint64, data []byte) ([]byte, error)

// ErrCallFailed is an error the called node answered a call with.
var ErrCallFailed = errors.New("raft: the called node answered with an error")

// SetCallHandler installs what answers calls made to g on this node.
func (g *Group) SetCallHandler(fn CallHandler) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.call = fn
}

// Call sends data to node to, for the owner of its replica of group, and
// waits for the answer until ctx ends.
func (h *Host) Call(ctx context.Context, group, to uint64, data []byte) ([]byte, error) {
	r := h.request(ctx, KindCall, group, to, data)
	return r.data, r.err
}

// called answers what node from sent to g, in the background, unless it
// arrived expired (forward.go): its caller gave up, and its handler may
// have forgotten an earlier copy. Caller holds g.mu.
func (h *Host) called(g *Group, from uint64, e *Envelope) {
	reply := Envelope{Kind: KindCallReply, Group: g.id, Index: e.Index}
	if expired(e, time.Now()) {
		h.answer(from, reply, ErrLate.Error(), nil, nil)
		return
	}
	var handle func(context.Context) (int64, []byte, error)
	if fn := g.call; fn != nil {
		handle = func(ctx context.Context) (int64, []byte, error) {
			data, err := fn(ctx, from, e.Data)
			return 0, data, err
		}
	}
	h.answer(from, reply, "no calls taken for this group", handle, nil)
}
