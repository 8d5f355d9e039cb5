package httpapi

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"

	"github.com/wharf-mq/wharf/internal/amqp"
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

func channelName(c amqp.ConnectionInfo, ch amqp.ChannelInfo) string {
	return c.Name + " (" + strconv.Itoa(int(ch.Number)) + ")"
}

func (s *Server) channelJSON(c amqp.ConnectionInfo, ch amqp.ChannelInfo) map[string]any {
	return map[string]any{
		"name": channelName(c, ch), "node": s.cfg.NodeName, "number": ch.Number, "state": "running",
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
			if channelName(c, ch) == r.PathValue("channel") {
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

// consumerView is a consumer with the channel and connection it is on.
type consumerView struct {
	conn    amqp.ConnectionInfo
	channel amqp.ChannelInfo
	info    amqp.ConsumerInfo
}

// consumersOf returns every consumer of conns, by queue and tag.
func consumersOf(conns []amqp.ConnectionInfo) []consumerView {
	var out []consumerView
	for _, c := range conns {
		for _, ch := range c.Channels {
			for _, k := range ch.Consumers {
				out = append(out, consumerView{conn: c, channel: ch, info: k})
			}
		}
	}
	slices.SortFunc(out, func(a, b consumerView) int {
		return cmp.Or(cmp.Compare(a.conn.VHost, b.conn.VHost), cmp.Compare(a.info.Queue, b.info.Queue), cmp.Compare(a.info.Tag, b.info.Tag))
	})
	return out
}

func (s *Server) consumerJSON(k consumerView) map[string]any {
	return map[string]any{
		"consumer_tag": k.info.Tag, "queue": map[string]any{"name": k.info.Queue, "vhost": k.conn.VHost},
		"ack_required": k.info.AckRequired, "exclusive": k.info.Exclusive, "prefetch_count": k.info.Prefetch,
		"arguments": jsonTable(k.info.Args), "active": true, "activity_status": "up",
		"channel_details": map[string]any{
			"name": channelName(k.conn, k.channel), "number": k.channel.Number, "connection_name": k.conn.Name,
			"node": s.cfg.NodeName, "peer_host": k.conn.PeerHost, "peer_port": k.conn.PeerPort, "user": k.conn.User,
		},
	}
}

// listConsumers is GET /api/consumers[/{vhost}].
func (s *Server) listConsumers(w http.ResponseWriter, r *http.Request) {
	conns, ok := s.connections(w, r)
	if !ok {
		return
	}
	out := []map[string]any{}
	for _, k := range consumersOf(conns) {
		out = append(out, s.consumerJSON(k))
	}
	writeList(w, r, out)
}
