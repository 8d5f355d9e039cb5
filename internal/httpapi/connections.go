package httpapi

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/wharf-mq/wharf/internal/amqp"
	"github.com/wharf-mq/wharf/internal/mq"
)

// Connections, channels and consumers come from the AMQP front end
// (Config.AMQP), one snapshot per request.

// connections returns the front end's connections the user may see
// (seesConnection) sorted by name, those of the request's {vhost} only if
// it names one (404 if it does not exist: ok false).
func (s *Server) connections(w http.ResponseWriter, r *http.Request) ([]amqp.ConnectionInfo, bool) {
	vhost := r.PathValue("vhost")
	if vhost != "" {
		if _, ok := s.vhostOf(w, r); !ok {
			return nil, false
		}
	}
	u := requester(r)
	conns := slices.DeleteFunc(s.amqp.Connections(), func(c amqp.ConnectionInfo) bool {
		return vhost != "" && c.VHost != vhost || !seesConnection(u, c.User)
	})
	slices.SortFunc(conns, func(a, b amqp.ConnectionInfo) int { return cmp.Compare(a.Name, b.Name) })
	return conns, true
}

// connection returns the connection {connection} names, or answers 404
// (401 to a user who may not see it: RabbitMQ's is_authorized_user).
func (s *Server) connection(w http.ResponseWriter, r *http.Request) (amqp.ConnectionInfo, bool) {
	for _, c := range s.amqp.Connections() {
		if c.Name == r.PathValue("connection") {
			if !seesConnection(requester(r), c.User) {
				writeNotAuthorised(w, "User not authorised to access object")
				return amqp.ConnectionInfo{}, false
			}
			return c, true
		}
	}
	writeNotFound(w)
	return amqp.ConnectionInfo{}, false
}

func (s *Server) connectionJSON(c amqp.ConnectionInfo) map[string]any {
	state := "running"
	if c.Blocked {
		state = "blocked"
	}
	obj := map[string]any{
		"name": c.Name, "node": s.cfg.NodeName, "type": "network", "protocol": "AMQP 0-9-1", "state": state,
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

// closeConnection is DELETE /api/connections/{connection}: the client
// gets connection.close 320 CONNECTION_FORCED with the X-Reason header's
// text, or RabbitMQ's "Closed via management plugin".
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
	if !s.amqp.CloseConnection(c.Name, reason) {
		writeNotFound(w)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// channelName is RabbitMQ's name of a channel: "connection (number)".
func channelName(connection string, number uint16) string {
	return connection + " (" + strconv.Itoa(int(number)) + ")"
}

func (s *Server) channelJSON(c amqp.ConnectionInfo, ch amqp.ChannelInfo) map[string]any {
	return map[string]any{
		"name": channelName(c.Name, ch.Number), "node": s.cfg.NodeName, "number": ch.Number, "state": "running",
		"user": c.User, "user_who_performed_action": c.User, "vhost": c.VHost,
		"connection_details": map[string]any{"name": c.Name, "peer_host": c.PeerHost, "peer_port": c.PeerPort},
		"consumer_count":     len(ch.Consumers), "prefetch_count": ch.Prefetch, "global_prefetch_count": ch.GlobalPrefetch,
		"confirm": ch.Confirm, "transactional": ch.Transactional,
		"messages_unacknowledged": ch.Unacknowledged, "messages_unconfirmed": ch.Unconfirmed,
		"messages_uncommitted": 0, "acks_uncommitted": 0, "pending_raft_commands": 0,
		"message_stats": statsObject(ch.MessageStats),
	}
}

// writeChannels answers with the channels of conns, sorted by name.
func (s *Server) writeChannels(w http.ResponseWriter, r *http.Request, conns []amqp.ConnectionInfo) {
	out := []map[string]any{}
	for _, c := range conns {
		chans := slices.Clone(c.Channels)
		slices.SortFunc(chans, func(a, b amqp.ChannelInfo) int { return cmp.Compare(a.Number, b.Number) })
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
		s.writeChannels(w, r, []amqp.ConnectionInfo{c})
	}
}

// getChannel is GET /api/channels/{channel}, named "connection (number)".
func (s *Server) getChannel(w http.ResponseWriter, r *http.Request) {
	for _, c := range s.amqp.Connections() {
		for _, ch := range c.Channels {
			if channelName(c.Name, ch.Number) == r.PathValue("channel") {
				if !seesConnection(requester(r), c.User) {
					writeNotAuthorised(w, "User not authorised to access object")
					return
				}
				writeJSON(w, http.StatusOK, s.channelJSON(c, ch))
				return
			}
		}
	}
	writeNotFound(w)
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
	if len(unanswered) > 0 {
		w.Header().Set(unansweredHeader, strings.Join(s.nodeNames(unanswered), ", "))
	}
	all := append(amqp.ConsumerDetails(s.amqp.Connections()), elsewhere...)
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

// unansweredHeader names, in a listing of consumers, the cluster nodes
// that were out of contact or did not answer in time: their clients'
// consumers are missing from it.
const unansweredHeader = "Wharf-Unanswered-Nodes"

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
