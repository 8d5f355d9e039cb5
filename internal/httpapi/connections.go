package httpapi

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/wharf-mq/wharf/internal/mq"
)

// Connections, channels and consumers come from the AMQP front end
// (Config.AMQP), one snapshot per request, and in a cluster from the
// other nodes' (mq.Registry.ConnectionsElsewhere, ConsumersElsewhere):
// every node shows the whole cluster's, as RabbitMQ's management API
// does, each with its node. The nodes that did not answer in time are
// left out, and named in the answer's unansweredHeader, so that a short
// list is not taken for the cluster's.

// unansweredHeader names, in a listing of connections, channels or
// consumers, the cluster nodes that were out of contact or did not answer
// in time: their clients are missing from it.
const unansweredHeader = "Wharf-Unanswered-Nodes"

// nameUnanswered names the nodes of unanswered in w's unansweredHeader.
func (s *Server) nameUnanswered(w http.ResponseWriter, unanswered []int32) {
	if len(unanswered) > 0 {
		w.Header().Set(unansweredHeader, strings.Join(s.nodeNames(unanswered), ", "))
	}
}

// connections returns the connections of every node the user may see
// (seesConnection), sorted by name, those of the request's {vhost} only
// if it names one (404 if it does not exist: ok false).
func (s *Server) connections(w http.ResponseWriter, r *http.Request) ([]mq.ConnectionDetail, bool) {
	vhost := r.PathValue("vhost")
	if vhost != "" {
		if _, ok := s.vhostOf(w, r); !ok {
			return nil, false
		}
	}
	elsewhere, unanswered := s.reg.ConnectionsElsewhere(r.Context(), vhost, "")
	s.nameUnanswered(w, unanswered)
	u := requester(r)
	conns := slices.DeleteFunc(append(s.amqp.ConnectionDetails(), elsewhere...), func(c mq.ConnectionDetail) bool {
		return vhost != "" && c.VHost != vhost || !seesConnection(u, c.User)
	})
	slices.SortFunc(conns, func(a, b mq.ConnectionDetail) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Node, b.Node))
	})
	return conns, true
}

// connection returns the connection {connection} names, or answers 404
// (401 to a user who may not see it: RabbitMQ's is_authorized_user).
func (s *Server) connection(w http.ResponseWriter, r *http.Request) (mq.ConnectionDetail, bool) {
	c, ok := s.connectionNamed(w, r, r.PathValue("connection"))
	switch {
	case !ok:
		writeNotFound(w)
	case !seesConnection(requester(r), c.User):
		writeNotAuthorised(w, "User not authorised to access object")
		ok = false
	}
	return c, ok
}

// connectionNamed returns the connection named name: this node's, or
// another node's (the lowest's, should two have one of that name). If
// none has it, it names the nodes that did not answer.
func (s *Server) connectionNamed(w http.ResponseWriter, r *http.Request, name string) (mq.ConnectionDetail, bool) {
	for _, c := range s.amqp.ConnectionDetails() {
		if c.Name == name {
			return c, true
		}
	}
	elsewhere, unanswered := s.reg.ConnectionsElsewhere(r.Context(), "", name)
	if len(elsewhere) == 0 {
		s.nameUnanswered(w, unanswered)
		return mq.ConnectionDetail{}, false
	}
	return slices.MinFunc(elsewhere, func(a, b mq.ConnectionDetail) int { return cmp.Compare(a.Node, b.Node) }), true
}

func (s *Server) connectionJSON(c mq.ConnectionDetail) map[string]any {
	state := "running"
	if c.Blocked {
		state = "blocked"
	}
	obj := map[string]any{
		"name": c.Name, "node": s.nodeName(c.Node), "type": "network", "protocol": "AMQP 0-9-1", "state": state,
		"user": c.User, "user_who_performed_action": c.User, "vhost": c.VHost, "auth_mechanism": c.AuthMechanism,
		"host": c.Host, "port": c.Port, "peer_host": c.PeerHost, "peer_port": c.PeerPort,
		"channels": len(c.Channels), "channel_max": c.ChannelMax, "frame_max": c.FrameMax,
		"timeout": int(c.Heartbeat.Seconds()), "connected_at": c.ConnectedAt.UnixMilli(),
		"client_properties": jsonTable(c.ClientProperties), "send_pend": 0,
	}
	if name, ok := jsonValue(c.ClientProperties["connection_name"]).(string); ok {
		obj["user_provided_name"] = name
	}
	putTLS(obj, c.TLS)
	putStats(obj, c.Traffic)
	return obj
}

// listConnections is GET /api/connections and /api/vhosts/{vhost}/connections.
func (s *Server) listConnections(w http.ResponseWriter, r *http.Request) {
	conns, ok := s.connections(w, r)
	if !ok {
		return
	}
	out := []map[string]any{}
	for _, c := range conns {
		out = append(out, s.connectionJSON(c))
	}
	writeList(w, r, out)
}

// getConnection is GET /api/connections/{connection}.
func (s *Server) getConnection(w http.ResponseWriter, r *http.Request) {
	if c, ok := s.connection(w, r); ok {
		writeJSON(w, http.StatusOK, s.connectionJSON(c))
	}
}

// closeConnection is DELETE /api/connections/{connection}, on whichever
// node the connection is: the client gets connection.close 320
// CONNECTION_FORCED with the X-Reason header's text, or RabbitMQ's
// "Closed via management plugin". 503 if its node does not answer.
func (s *Server) closeConnection(w http.ResponseWriter, r *http.Request) {
	c, ok := s.connection(w, r)
	if !ok {
		return
	}
	if u := requester(r); !isAdmin(u) && u.Name != c.User {
		writeNotAuthorised(w, "User not authorised to access object")
		return
	}
	reason := r.Header.Get("X-Reason")
	if reason == "" {
		reason = "Closed via management plugin"
	}
	var closed bool
	var err error
	if c.Node == 0 {
		closed = s.amqp.CloseConnection(c.Name, reason)
	} else {
		closed, err = s.reg.CloseConnectionOn(r.Context(), c.Node, c.Name, reason)
	}
	switch {
	case err != nil:
		s.nameUnanswered(w, []int32{c.Node})
		writeError(w, http.StatusServiceUnavailable, "node_unavailable", fmt.Sprintf("node %s did not answer", s.nodeName(c.Node)))
	case !closed: // gone since it was looked up
		writeNotFound(w)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// channelName is RabbitMQ's name of a channel: "connection (number)".
func channelName(connection string, number uint16) string {
	return connection + " (" + strconv.Itoa(int(number)) + ")"
}

func (s *Server) channelJSON(c mq.ConnectionDetail, ch mq.ChannelDetail) map[string]any {
	return map[string]any{
		"name": channelName(c.Name, ch.Number), "node": s.nodeName(c.Node), "number": ch.Number, "state": "running",
		"user": c.User, "user_who_performed_action": c.User, "vhost": c.VHost,
		"connection_details": map[string]any{"name": c.Name, "peer_host": c.PeerHost, "peer_port": c.PeerPort},
		"consumer_count":     ch.Consumers, "prefetch_count": ch.Prefetch, "global_prefetch_count": ch.GlobalPrefetch,
		"confirm": ch.Confirm, "transactional": ch.Transactional,
		"messages_unacknowledged": ch.Unacknowledged, "messages_unconfirmed": ch.Unconfirmed,
		"messages_uncommitted": 0, "acks_uncommitted": 0, "pending_raft_commands": 0,
		"message_stats": statsObject(ch.MessageStats),
	}
}

// writeChannels answers with the channels of conns, sorted by name.
func (s *Server) writeChannels(w http.ResponseWriter, r *http.Request, conns []mq.ConnectionDetail) {
	out := []map[string]any{}
	for _, c := range conns {
		chans := slices.Clone(c.Channels)
		slices.SortFunc(chans, func(a, b mq.ChannelDetail) int { return cmp.Compare(a.Number, b.Number) })
		for _, ch := range chans {
			out = append(out, s.channelJSON(c, ch))
		}
	}
	writeList(w, r, out)
}

// listChannels is GET /api/channels and /api/vhosts/{vhost}/channels.
func (s *Server) listChannels(w http.ResponseWriter, r *http.Request) {
	if conns, ok := s.connections(w, r); ok {
		s.writeChannels(w, r, conns)
	}
}

// listConnectionChannels is GET /api/connections/{connection}/channels.
func (s *Server) listConnectionChannels(w http.ResponseWriter, r *http.Request) {
	if c, ok := s.connection(w, r); ok {
		s.writeChannels(w, r, []mq.ConnectionDetail{c})
	}
}

// getChannel is GET /api/channels/{channel}, named "connection (number)",
// on whichever node its connection is.
func (s *Server) getChannel(w http.ResponseWriter, r *http.Request) {
	connection, number, ok := cutChannelName(r.PathValue("channel"))
	var c mq.ConnectionDetail
	if ok {
		c, ok = s.connectionNamed(w, r, connection)
	}
	i := slices.IndexFunc(c.Channels, func(ch mq.ChannelDetail) bool { return ch.Number == number })
	switch {
	case !ok || i < 0:
		writeNotFound(w)
	case !seesConnection(requester(r), c.User):
		writeNotAuthorised(w, "User not authorised to access object")
	default:
		writeJSON(w, http.StatusOK, s.channelJSON(c, c.Channels[i]))
	}
}

// cutChannelName splits a channel's name (channelName) into its
// connection's name and its number.
func cutChannelName(name string) (connection string, number uint16, ok bool) {
	i := strings.LastIndex(name, " (")
	if i < 0 || !strings.HasSuffix(name, ")") {
		return "", 0, false
	}
	n, err := strconv.ParseUint(name[i+2:len(name)-1], 10, 16)
	return name[:i], uint16(n), err == nil
}

// consumers returns the consumers of vhost and queue (empty: any), on
// every node: those of this node's clients, from the front end, and in a
// cluster those of the other nodes' clients, asked of them
// (mq.Registry.ConsumersElsewhere), sorted by vhost, queue, tag and
// channel. The nodes that did not answer in time are left out, and named
// in the answer's unansweredHeader, so that a short list is not taken for
// the cluster's.
func (s *Server) consumers(w http.ResponseWriter, r *http.Request, vhost, queue string) []mq.ConsumerDetail {
	elsewhere, unanswered := s.reg.ConsumersElsewhere(r.Context(), vhost, queue)
	s.nameUnanswered(w, unanswered)
	all := append(s.amqp.ConsumerDetails(), elsewhere...)
	all = slices.DeleteFunc(all, func(k mq.ConsumerDetail) bool {
		return vhost != "" && k.VHost != vhost || queue != "" && k.Queue != queue
	})
	slices.SortFunc(all, func(a, b mq.ConsumerDetail) int {
		return cmp.Or(cmp.Compare(a.VHost, b.VHost), cmp.Compare(a.Queue, b.Queue), cmp.Compare(a.Tag, b.Tag),
			cmp.Compare(a.Channel.Node, b.Channel.Node), cmp.Compare(a.Channel.Connection, b.Channel.Connection),
			cmp.Compare(a.Channel.Number, b.Channel.Number))
	})
	return all
}

func (s *Server) consumerJSON(k mq.ConsumerDetail) map[string]any {
	ch := k.Channel
	return map[string]any{
		"consumer_tag": k.Tag, "queue": map[string]any{"name": k.Queue, "vhost": k.VHost},
		"ack_required": k.AckRequired, "exclusive": k.Exclusive, "prefetch_count": k.Prefetch,
		"arguments": jsonTable(k.Args), "active": true, "activity_status": "up",
		"channel_details": map[string]any{
			"name": channelName(ch.Connection, ch.Number), "number": ch.Number,
			"connection_name": ch.Connection, "node": s.nodeName(ch.Node), "peer_host": ch.PeerHost,
			"peer_port": ch.PeerPort, "user": ch.User,
		},
	}
}

// listConsumers is GET /api/consumers[/{vhost}]: the consumers of the
// connections the user may see (seesConnection), on every node.
func (s *Server) listConsumers(w http.ResponseWriter, r *http.Request) {
	vhost := r.PathValue("vhost")
	if vhost != "" {
		if _, ok := s.vhostOf(w, r); !ok {
			return
		}
	}
	u := requester(r)
	out := []map[string]any{}
	for _, k := range s.consumers(w, r, vhost, "") {
		if seesConnection(u, k.Channel.User) {
			out = append(out, s.consumerJSON(k))
		}
	}
	writeList(w, r, out)
}
