package mq

import (
	"context"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/rate"
)

// Connections and channels of clients connected to other nodes (issue
// 14), asked of them as consumers are (clients_cluster.go): a listing of
// connections or channels asks every other node at once for its clients'
// connections (opConnections, narrowed to the listing's vhost or to one
// connection's name), /api/overview asks for their counts by user
// (opClientTotals), and DELETE /api/connections/{name} closes a
// connection on the node it is on (opCloseConnection).

const (
	// opConnections asks a node for its clients' connections: those of
	// the request's VHost, or the one of its Name (empty: any).
	opConnections remoteOp = "connections"
	// opCloseConnection asks a node to close its client's connection
	// Name, with Reason.
	opCloseConnection remoteOp = "close-connection"
	// opClientTotals asks a node how many connections, channels and
	// consumers each user's clients have there: /api/overview's counts,
	// polled by every open console, without every connection's details.
	opClientTotals remoteOp = "client-totals"
)

// ConnectionDetail is a client's connection with its channels, as the
// management API shows it.
type ConnectionDetail struct {
	Name          string    `json:"name"` // RabbitMQ's "peer -> local"
	User          string    `json:"user"`
	VHost         string    `json:"vhost"`
	PeerHost      string    `json:"peer_host"` // the client's address
	PeerPort      int       `json:"peer_port"`
	Host          string    `json:"host"` // the node's
	Port          int       `json:"port"`
	AuthMechanism string    `json:"auth_mechanism"`
	ConnectedAt   time.Time `json:"connected_at"`
	// ClientProperties are those the client sent in start-ok; a node
	// call carries them in AMQP's table encoding (listedConnection).
	ClientProperties amqpwire.Table `json:"-"`
	ChannelMax       uint16         `json:"channel_max"`
	FrameMax         uint32         `json:"frame_max"`
	Heartbeat        time.Duration  `json:"heartbeat"`
	Blocked          bool           `json:"blocked,omitempty"` // held up by a resource alarm
	// Traffic is recv_oct, recv_cnt, send_oct and send_cnt with their
	// rates.
	Traffic  []rate.Stat     `json:"traffic"`
	TLS      *TLSDetail      `json:"tls,omitempty"` // nil for plain TCP
	Channels []ChannelDetail `json:"channels"`
	// Node is the node the connection is on: 0 for this one.
	Node int32 `json:"-"`
}

// TLSDetail is what the management API shows of a connection's TLS.
type TLSDetail struct {
	Protocol string `json:"protocol"` // as Erlang's ssl names it: tlsv1.3
	Cipher   string `json:"cipher"`
	// The client's certificate, if it sent one (Validity empty if not).
	PeerCertSubject  string `json:"peer_cert_subject,omitempty"`
	PeerCertIssuer   string `json:"peer_cert_issuer,omitempty"`
	PeerCertValidity string `json:"peer_cert_validity,omitempty"`
}

// ChannelDetail is one open channel of a connection.
type ChannelDetail struct {
	Number uint16 `json:"number"`
	// Prefetch is basic.qos with global=false, GlobalPrefetch with
	// global=true.
	Prefetch       int  `json:"prefetch"`
	GlobalPrefetch int  `json:"global_prefetch"`
	Confirm        bool `json:"confirm,omitempty"`
	Transactional  bool `json:"transactional,omitempty"`
	Unacknowledged int  `json:"unacknowledged"` // deliveries awaiting ack
	Unconfirmed    int  `json:"unconfirmed"`    // publishes awaiting their confirm
	Consumers      int  `json:"consumers"`
	// MessageStats is RabbitMQ's message_stats of a channel.
	MessageStats []rate.Stat `json:"message_stats"`
}

// listedConnection is a ConnectionDetail in an opConnections answer.
type listedConnection struct {
	ConnectionDetail
	ClientProperties []byte `json:"client_properties,omitempty"`
}

// ConnectionsElsewhere returns the connections of clients of the
// cluster's other nodes, of vhost, or the one(s) named name (empty: any),
// each with its node, and the nodes out of contact or that did not answer
// in time (left out). A single node has none.
func (r *Registry) ConnectionsElsewhere(ctx context.Context, vhost, name string) ([]ConnectionDetail, []int32) {
	return fromOtherNodes(ctx, r, &clientsRequest{Op: opConnections, VHost: vhost, Name: name}, decodeConnections)
}

// decodeConnections reads node's answer to opConnections.
func decodeConnections(node int32, reply *clientsReply) ([]ConnectionDetail, error) {
	out := make([]ConnectionDetail, len(reply.Connections))
	for i, l := range reply.Connections {
		props, err := readTable(l.ClientProperties)
		if err != nil {
			return nil, err
		}
		out[i] = l.ConnectionDetail
		out[i].ClientProperties, out[i].Node = props, node
	}
	return out, nil
}

// listedConnections answers opConnections: c's connections of vhost, or
// named name (empty: any).
func listedConnections(c Clients, vhost, name string) ([]listedConnection, error) {
	var out []listedConnection
	for _, conn := range c.ConnectionDetails() {
		if vhost != "" && conn.VHost != vhost || name != "" && conn.Name != name {
			continue
		}
		props, err := amqpwire.AppendTable(nil, conn.ClientProperties)
		if err != nil {
			return nil, err
		}
		out = append(out, listedConnection{ConnectionDetail: conn, ClientProperties: props})
	}
	return out, nil
}

// ClientTotals counts a user's connections, with their channels and
// consumers.
type ClientTotals struct {
	User        string `json:"user"`
	Connections int    `json:"connections"`
	Channels    int    `json:"channels"`
	Consumers   int    `json:"consumers"`
}

// TotalsByUser counts conns by user, in no order.
func TotalsByUser(conns []ConnectionDetail) []ClientTotals {
	at := make(map[string]int) // a user's index in out
	var out []ClientTotals
	for _, c := range conns {
		i, ok := at[c.User]
		if !ok {
			i, at[c.User] = len(out), len(out)
			out = append(out, ClientTotals{User: c.User})
		}
		t := &out[i]
		t.Connections++
		t.Channels += len(c.Channels)
		for _, ch := range c.Channels {
			t.Consumers += ch.Consumers
		}
	}
	return out
}

// ClientTotalsElsewhere returns the totals by user of the clients of the
// cluster's other nodes (a user with clients on two nodes has two), and
// the nodes out of contact or that did not answer in time (left out).
func (r *Registry) ClientTotalsElsewhere(ctx context.Context) ([]ClientTotals, []int32) {
	return fromOtherNodes(ctx, r, &clientsRequest{Op: opClientTotals}, func(_ int32, reply *clientsReply) ([]ClientTotals, error) {
		return reply.Totals, nil
	})
}

// CloseConnectionOn closes the connection name of a client of node,
// another node of the cluster, as CloseConnection does, and reports
// whether it was open there; ErrNodeUnanswered if node is out of contact
// or did not answer within statsWait.
func (r *Registry) CloseConnectionOn(ctx context.Context, node int32, name, reason string) (bool, error) {
	if c := r.cfg.Cluster; c == nil || c.CallNode == nil || !r.peerUp(node) {
		return false, ErrNodeUnanswered
	}
	ctx, cancel := context.WithTimeout(ctx, statsWait)
	defer cancel()
	reply, err := r.askClientsOf(ctx, node, &clientsRequest{Op: opCloseConnection, Name: name, Reason: reason})
	if err != nil {
		return false, err
	}
	return reply.Closed, nil
}
