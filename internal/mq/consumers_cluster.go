package mq

import (
	"context"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// Consumers of clients connected to other nodes (issue 14). A client's
// consumer lives on the node its connection is on, whichever node serves
// the queue, and only that node knows its channel and connection. A
// listing of consumers asks every other node at once for those of its
// clients (opConsumers, with the listing's vhost and queue to narrow the
// answer), as clients_cluster.go tells.

// opConsumers asks a node for the consumers of its clients: those of the
// request's VHost and queue Name (empty: any).
const opConsumers remoteOp = "consumers"

// ConsumerDetail is a consumer of a client, with the channel it is on,
// as the management API lists it.
type ConsumerDetail struct {
	VHost, Queue, Tag      string
	AckRequired, Exclusive bool
	Prefetch               int
	Args                   amqpwire.Table
	Channel                ConsumerChannel
}

// ConsumerChannel is the channel a consumer is on, and its connection.
type ConsumerChannel struct {
	Number     uint16 `json:"number"`
	Connection string `json:"connection"` // the connection's name, "peer -> local"
	User       string `json:"user"`
	PeerHost   string `json:"peer_host"`
	PeerPort   int    `json:"peer_port"`
	// Node is the node the connection is on: 0 for this one (the node
	// answering a listing leaves it out, its caller knows it).
	Node int32 `json:"-"`
}

// listedConsumer is a ConsumerDetail in an opConsumers answer: its
// arguments in AMQP's table encoding, which keeps their field types.
type listedConsumer struct {
	VHost       string          `json:"vhost"`
	Queue       string          `json:"queue"`
	Tag         string          `json:"tag"`
	AckRequired bool            `json:"ack_required,omitempty"`
	Exclusive   bool            `json:"exclusive,omitempty"`
	Prefetch    int             `json:"prefetch,omitempty"`
	Args        []byte          `json:"args,omitempty"`
	Channel     ConsumerChannel `json:"channel"`
}

// ConsumersElsewhere returns the consumers of clients connected to the
// cluster's other nodes, of vhost and queue (empty: any), each with its
// node, and the nodes out of contact or that did not answer in time
// (left out). A single node has none.
func (r *Registry) ConsumersElsewhere(ctx context.Context, vhost, queue string) ([]ConsumerDetail, []int32) {
	return fromOtherNodes(ctx, r, &clientsRequest{Op: opConsumers, VHost: vhost, Name: queue}, decodeConsumers)
}

// decodeConsumers reads node's answer to opConsumers.
func decodeConsumers(node int32, reply *clientsReply) ([]ConsumerDetail, error) {
	out := make([]ConsumerDetail, len(reply.Consumers))
	for i, l := range reply.Consumers {
		args, err := readTable(l.Args)
		if err != nil {
			return nil, err
		}
		out[i] = ConsumerDetail{VHost: l.VHost, Queue: l.Queue, Tag: l.Tag, AckRequired: l.AckRequired,
			Exclusive: l.Exclusive, Prefetch: l.Prefetch, Args: args, Channel: l.Channel}
		out[i].Channel.Node = node
	}
	return out, nil
}

// listedConsumers answers opConsumers: the consumers of c's clients of
// vhost and queue (empty: any).
func listedConsumers(c Clients, vhost, queue string) ([]listedConsumer, error) {
	var out []listedConsumer
	for _, k := range c.ConsumerDetails() {
		if vhost != "" && k.VHost != vhost || queue != "" && k.Queue != queue {
			continue
		}
		args, err := amqpwire.AppendTable(nil, k.Args)
		if err != nil {
			return nil, err
		}
		out = append(out, listedConsumer{VHost: k.VHost, Queue: k.Queue, Tag: k.Tag,
			AckRequired: k.AckRequired, Exclusive: k.Exclusive, Prefetch: k.Prefetch, Args: args, Channel: k.Channel})
	}
	return out, nil
}
