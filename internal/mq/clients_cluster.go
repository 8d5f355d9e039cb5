package mq

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// Clients of other nodes (issue 14). A client's connection, its channels
// and its consumers live on the node it connected to, and only that node
// knows them; RabbitMQ's management API lists those of every node, on any
// node, and closes a connection wherever it is. Each node's AMQP front end
// tells the other nodes of its clients (Clients, answered by answerClients
// for answerCall), and a listing asks every other node at once
// (fromOtherNodes), waiting statsWait at most: a node out of contact or
// that does not answer in time is left out and named, so that an
// incomplete list is not taken for the whole. consumers_cluster.go and
// connections_cluster.go are what is asked.

// Clients is what a node's AMQP front end (*amqp.Server) tells the
// cluster's other nodes of its clients, and does for them.
type Clients interface {
	ConsumerDetails() []ConsumerDetail
	ConnectionDetails() []ConnectionDetail
	// CloseConnection closes the named connection, connection.close 320
	// CONNECTION_FORCED with reason, and reports whether it was open.
	CloseConnection(name, reason string) bool
}

// ServeClientsWith installs what answers the other nodes' questions about
// this node's clients (the AMQP front end); until then it has none.
func (r *Registry) ServeClientsWith(c Clients) {
	r.clients.Store(&c)
}

// clientsRequest is a node call about another node's clients, or about
// the queues and exchanges only it has (local_cluster.go). Its op, vhost
// and name are remoteRequest's, so answerCall tells it by its op.
type clientsRequest struct {
	Op    remoteOp `json:"op"`
	VHost string   `json:"vhost,omitempty"` // empty: any
	// Name is a queue's (opConsumers, opLocalQueues), an exchange's
	// (opLocalExchanges) or a connection's (empty: any).
	Name    string         `json:"name,omitempty"`
	Reason  string         `json:"reason,omitempty"`  // opCloseConnection's
	Binding *listedBinding `json:"binding,omitempty"` // opUnbindLocal's
}

// clientsReply answers a clientsRequest: the field of its op. Error is
// remoteReply's: a node that does not know the op (an older version)
// answers with one, and is not taken to have no clients.
type clientsReply struct {
	Consumers   []listedConsumer   `json:"consumers,omitempty"`    // opConsumers
	Connections []listedConnection `json:"connections,omitempty"`  // opConnections
	Totals      []ClientTotals     `json:"totals,omitempty"`       // opClientTotals
	Closed      bool               `json:"closed,omitempty"`       // opCloseConnection
	Queues      []listedQueue      `json:"queues,omitempty"`       // opLocalQueues
	Exchanges   []listedExchange   `json:"exchanges,omitempty"`    // opLocalExchanges
	LocalTotals []VHostTotals      `json:"local_totals,omitempty"` // opLocalTotals
	Bindings    []listedBinding    `json:"bindings,omitempty"`     // opLocalBindings
	Unbound     bool               `json:"unbound,omitempty"`      // opUnbindLocal
	Error       string             `json:"error,omitempty"`
	Code        uint16             `json:"code,omitempty"` // Error's AMQP reply code, if it has one
}

// answerClients answers another node's clientsRequest, encoded in data
// (answerCall gives it those of the ops of clientsReply). A node whose front end is not up yet, or that is closing, has no
// clients.
func (r *Registry) answerClients(data []byte) ([]byte, error) {
	var req clientsRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, err
	}
	var c Clients = noClients{}
	if p := r.clients.Load(); p != nil && !r.closed.Load() {
		c = *p
	}
	var reply clientsReply
	var err error
	switch req.Op {
	case opConsumers:
		reply.Consumers, err = listedConsumers(c, req.VHost, req.Name)
	case opConnections:
		reply.Connections, err = listedConnections(c, req.VHost, req.Name)
	case opClientTotals:
		reply.Totals = TotalsByUser(c.ConnectionDetails())
	case opCloseConnection:
		reply.Closed = c.CloseConnection(req.Name, req.Reason)
	case opLocalQueues:
		if !r.closed.Load() {
			reply.Queues, err = r.listedLocalQueues(req.VHost, req.Name)
		}
	case opLocalExchanges:
		if !r.closed.Load() {
			reply.Exchanges, err = r.listedLocalExchanges(req.VHost, req.Name)
		}
	case opLocalTotals:
		if !r.closed.Load() {
			reply.LocalTotals = r.localTotals(req.VHost)
		}
	case opLocalBindings:
		if !r.closed.Load() {
			reply.Bindings, err = r.listedLocalBindings(req.VHost)
		}
	case opUnbindLocal:
		if r.closed.Load() {
			return nil, ErrClosed // the asking node takes it as unanswered
		}
		var unbound *clientsReply
		if unbound, err = r.unbindLocal(req.Binding); err == nil {
			return json.Marshal(unbound)
		}
	}
	if err != nil {
		return nil, err
	}
	return json.Marshal(&reply)
}

// noClients are those of a node without its front end.
type noClients struct{}

func (noClients) ConsumerDetails() []ConsumerDetail     { return nil }
func (noClients) ConnectionDetails() []ConnectionDetail { return nil }
func (noClients) CloseConnection(string, string) bool   { return false }

// fromOtherNodes asks every other node of the cluster at once with req,
// and waits statsWait at most: it returns what decode made of their
// answers, and the nodes out of contact, that did not answer in time, or
// whose answer decode refused, sorted. A single node asks none.
func fromOtherNodes[T any](ctx context.Context, r *Registry, req *clientsRequest,
	decode func(node int32, reply *clientsReply) ([]T, error)) (got []T, unanswered []int32) {
	c := r.cfg.Cluster
	if c == nil || c.CallNode == nil || c.Nodes == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, statsWait)
	defer cancel()
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for _, node := range c.Nodes() {
		switch {
		case node == r.nodeID():
			continue
		case !r.peerUp(node):
			unanswered = append(unanswered, node)
			continue
		}
		wg.Go(func() {
			reply, err := r.askClientsOf(ctx, node, req)
			var items []T
			if err == nil {
				items, err = decode(node, reply)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				unanswered = append(unanswered, node)
				return
			}
			got = append(got, items...)
		})
	}
	wg.Wait()
	slices.Sort(unanswered)
	return got, unanswered
}

// ErrNodeUnanswered fails a request to another node that is out of
// contact or did not answer in time.
var ErrNodeUnanswered = errors.New("mq: the node did not answer")

// askClientsOf sends req to node and returns its answer, or the error
// that refused it.
func (r *Registry) askClientsOf(ctx context.Context, node int32, req *clientsRequest) (*clientsReply, error) {
	data, err := json.Marshal(req)
	if err != nil {
		panic(err) // a request of strings cannot fail to encode
	}
	answer, err := r.cfg.Cluster.CallNode(ctx, node, data)
	if err != nil {
		return nil, errors.Join(ErrNodeUnanswered, err)
	}
	var reply clientsReply
	if err := json.Unmarshal(answer, &reply); err != nil {
		return nil, err
	}
	if err := replyError(&remoteReply{Error: reply.Error, Code: reply.Code}); err != nil {
		return nil, err
	}
	return &reply, nil
}

// readTable decodes an AMQP field table sent in a node call (nil if
// empty): the JSON of a table would lose its values' field types.
func readTable(data []byte) (amqpwire.Table, error) {
	if len(data) == 0 {
		return nil, nil
	}
	t, _, err := amqpwire.ReadTable(data)
	return t, err
}
