package mq

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Direct reply-to in a cluster. A reply consumer's name carries its
// node's id (replyto.go), as RabbitMQ's carries its channel's pid: a
// reply published on another node is forwarded there (opReplies) and a
// declare of the name there asks that node (opReplyExists), over the
// calls classic queues of other nodes are reached by (classic_remote.go).
// Forwarding is as RabbitMQ's delegate cast: the reply counts as routed
// and is confirmed at once, and a node out of contact loses it (at most
// once, as every reply). One goroutine per node sends that node's
// replies in publish order, batched while a call is out; it ends once
// nothing waits, and at Close.

const (
	// opReplies hands replies published on another node to this node's
	// reply consumers.
	opReplies remoteOp = "replies"
	// opReplyExists asks whether the reply consumer of Name (in VHost)
	// is there.
	opReplyExists remoteOp = "reply-exists"
)

// maxForwardedReplyBytes bounds the reply bytes waiting for one node: a
// node that answers slowly loses replies beyond it rather than this node
// memory.
const maxForwardedReplyBytes = 16 << 20

// forwardedReply is a reply on its way to its consumer's node.
type forwardedReply struct {
	VHost      string `json:"vhost"`
	Name       string `json:"name"`
	Exchange   string `json:"exchange,omitempty"`
	RoutingKey string `json:"routing_key"`
	Properties []byte `json:"properties,omitempty"`
	Body       []byte `json:"body,omitempty"`
}

// replyForwards are the replies waiting to be sent to each node.
type replyForwards struct {
	mu      sync.Mutex
	pending map[int32][]forwardedReply
	bytes   map[int32]int
	sending map[int32]bool // its goroutine runs
}

// replyNode returns the node id a reply name carries.
func replyNode(name string) (int32, bool) {
	rest, ok := strings.CutPrefix(name, replyToPrefix)
	if !ok {
		return 0, false
	}
	node, key, ok := strings.Cut(rest, ".")
	if !ok || key == "" {
		return 0, false
	}
	id, err := strconv.ParseInt(node, 10, 32)
	return int32(id), err == nil
}

// replyPeer reports whether node, which a reply name carries, is another
// node of the cluster that calls reach.
func (r *Registry) replyPeer(node int32) bool {
	c := r.cfg.Cluster
	return c != nil && node != c.NodeID && c.CallNode != nil && c.Nodes != nil && slices.Contains(c.Nodes(), node)
}

// forwardReply queues m, a reply to name, for node.
func (v *VHost) forwardReply(node int32, name string, m *Message) {
	props, err := encodeProperties(m)
	if err != nil {
		return // it came off the wire, so it encodes
	}
	fr := forwardedReply{VHost: v.name, Name: name, Exchange: m.Exchange, RoutingKey: m.RoutingKey, Properties: props, Body: m.Body}
	size := len(fr.Body) + len(fr.Properties) + len(name)
	r := v.r
	f := &r.replyForwards
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.bytes[node]+size > maxForwardedReplyBytes {
		r.logger.Debug("mq: direct reply-to: replies wait for a node that is slow: dropped", "node", node)
		return
	}
	if f.pending == nil {
		f.pending, f.bytes, f.sending = make(map[int32][]forwardedReply), make(map[int32]int), make(map[int32]bool)
	}
	f.pending[node] = append(f.pending[node], fr)
	f.bytes[node] += size
	if f.sending[node] || !r.proxies.add(1) {
		return
	}
	f.sending[node] = true
	go func() {
		defer r.proxies.wg.Done()
		r.sendReplies(node)
	}()
}

// sendReplies sends node's waiting replies, a batch per call, until none
// waits or the registry closes.
func (r *Registry) sendReplies(node int32) {
	f := &r.replyForwards
	for {
		f.mu.Lock()
		batch := f.pending[node]
		delete(f.pending, node)
		delete(f.bytes, node)
		if len(batch) == 0 || r.proxies.ctx.Err() != nil {
			f.sending[node] = false
			f.mu.Unlock()
			return
		}
		f.mu.Unlock()
		data, err := json.Marshal(&remoteRequest{Op: opReplies, Replies: batch})
		if err == nil {
			ctx, cancel := context.WithTimeout(r.proxies.ctx, syncWaitRemote)
			_, err = r.cfg.Cluster.CallNode(ctx, node, data)
			cancel()
		}
		if err != nil {
			r.logger.Debug("mq: direct reply-to: replies to another node lost", "node", node, "replies", len(batch), "err", err)
		}
	}
}

// deliverForwarded hands replies another node forwarded to their
// consumers here (opReplies).
func (r *Registry) deliverForwarded(replies []forwardedReply) {
	for _, fr := range replies {
		v := r.vhostNamed(fr.VHost)
		if v == nil {
			continue
		}
		m := &Message{Exchange: fr.Exchange, RoutingKey: fr.RoutingKey, RawProperties: fr.Properties, Body: fr.Body}
		if len(m.RawProperties) > 0 && m.Properties.Decode(m.RawProperties) != nil {
			continue
		}
		v.deliverReply(fr.Name, m)
	}
}

// replyExistsThere asks node whether the reply consumer of name is there
// (a declare of the name on this node).
func (v *VHost) replyExistsThere(node int32, name string) bool {
	data, err := json.Marshal(&remoteRequest{Op: opReplyExists, VHost: v.name, Name: name})
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(v.r.proxies.ctx, syncWaitRemote)
	defer cancel()
	answer, err := v.r.cfg.Cluster.CallNode(ctx, node, data)
	if err != nil {
		return false // gone with its node, as far as anyone here can tell
	}
	var reply remoteReply
	return json.Unmarshal(answer, &reply) == nil && reply.Consumers == 1
}

// answerReplyExists answers opReplyExists.
func (r *Registry) answerReplyExists(req *remoteRequest) *remoteReply {
	if v := r.vhostNamed(req.VHost); v != nil && v.replyConsumer(req.Name) != nil {
		return &remoteReply{Consumers: 1}
	}
	return &remoteReply{}
}
