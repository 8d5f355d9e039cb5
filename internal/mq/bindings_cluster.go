package mq

import (
	"context"
	"errors"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// One binding of another node (issue 14). A binding from or to a
// transient exchange or queue is not in the definition store: only the
// node that has that end has it (local_cluster.go). RabbitMQ keeps every
// binding in one schema store, so its management API shows and deletes
// one by its full path on any node; here the node answering asks the
// others for theirs (BindingsElsewhere) and has the one that has it
// delete it (UnbindOn, opUnbindLocal).

// opUnbindLocal asks a node to delete the request's Binding, one only it
// has, and to tell whether it had it.
const opUnbindLocal remoteOp = "unbind-local"

// NodeBinding is a binding of another node that only that node has
// (Node).
type NodeBinding struct {
	VHost string
	Node  int32
	BindingInfo
}

// BindingsElsewhere returns the bindings that only the cluster's other
// nodes have, of vhost (empty: any), each with its node, and the nodes
// out of contact or that did not answer in time (theirs are missing). A
// single node has none.
func (r *Registry) BindingsElsewhere(ctx context.Context, vhost string) ([]NodeBinding, []int32) {
	return fromOtherNodes(ctx, r, &clientsRequest{Op: opLocalBindings, VHost: vhost},
		func(node int32, reply *clientsReply) ([]NodeBinding, error) {
			out := make([]NodeBinding, 0, len(reply.Bindings))
			for _, l := range reply.Bindings {
				args, err := readTable(l.Args)
				if err != nil {
					continue // not a table: a binding no node could have made
				}
				out = append(out, NodeBinding{VHost: l.VHost, Node: node, BindingInfo: BindingInfo{Source: l.Source,
					Destination: l.Destination, ToExchange: l.ToExchange, Key: l.Key, Args: args}})
			}
			return out, nil
		})
}

// UnbindOn deletes b, a binding of vhost that only node has
// (BindingsElsewhere), there, as UnbindQueue or UnbindExchange would
// there, and reports whether node had it; ErrNodeUnanswered if node is
// out of contact or did not answer within statsWait.
func (r *Registry) UnbindOn(ctx context.Context, node int32, vhost string, b BindingInfo) (bool, error) {
	if c := r.cfg.Cluster; c == nil || c.CallNode == nil || !r.peerUp(node) {
		return false, ErrNodeUnanswered
	}
	args, err := amqpwire.AppendTable(nil, b.Args)
	if err != nil {
		return false, errPrecondition("invalid binding arguments: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, statsWait)
	defer cancel()
	reply, err := r.askClientsOf(ctx, node, &clientsRequest{Op: opUnbindLocal, VHost: vhost, Binding: &listedBinding{
		VHost: vhost, Source: b.Source, Destination: b.Destination, ToExchange: b.ToExchange, Key: b.Key, Args: args}})
	if err != nil {
		return false, err
	}
	return reply.Unbound, nil
}

// unbindLocal answers opUnbindLocal: it deletes the binding l names, as
// an unbind of no connection's, and reports whether this node had it. An
// error that refuses the unbind goes back with its reply code.
func (r *Registry) unbindLocal(l *listedBinding) (*clientsReply, error) {
	if l == nil {
		return nil, errors.New("mq: unbind-local names no binding")
	}
	v := r.vhostNamed(l.VHost)
	if v == nil {
		return &clientsReply{}, nil
	}
	args, err := readTable(l.Args)
	if err != nil {
		return nil, err
	}
	if !l.ToExchange {
		if err := checkBindable(l.Destination); err != nil {
			return refusedReply(err), nil
		}
	}
	had, err := v.unbind(l.Source, l.Destination, l.ToExchange, l.Key, args, 0)
	if err != nil {
		return refusedReply(err), nil
	}
	return &clientsReply{Unbound: had}, nil
}

// refusedReply carries an error that refuses a request back to the node
// that asked, with its reply code if it has one (askClientsOf makes it
// an *Error again).
func refusedReply(err error) *clientsReply {
	e := errorReply(err)
	return &clientsReply{Error: e.Error, Code: e.Code}
}
