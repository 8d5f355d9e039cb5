package amqp

import (
	"crypto/tls"
	"net"
	"strconv"
	"time"

	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/mq"
	"github.com/wharf-mq/wharf/internal/rate"
)

// What the management API reads of the front end: the open connections
// with their channels and consumers, the node's message totals
// (stats.go), the resources the alarms watch, and a way to close a
// connection. Each call takes a snapshot; nothing here changes the
// connections but CloseConnection.

// ConnectionInfo is one open connection, as RabbitMQ's /api/connections
// shows it.
type ConnectionInfo struct {
	// Name is RabbitMQ's: "peer -> local", e.g. "127.0.0.1:50000 ->
	// 127.0.0.1:5672". CloseConnection takes it.
	Name             string
	User, VHost      string
	PeerHost, Host   string // the client's address and ours
	PeerPort, Port   int
	AuthMechanism    string
	ConnectedAt      time.Time
	ClientProperties amqpwire.Table // as the client sent them in start-ok
	ChannelMax       uint16
	FrameMax         uint32
	Heartbeat        time.Duration
	// Blocked is true while a resource alarm holds the connection's
	// publishes up (RabbitMQ's state "blocked").
	Blocked bool
	// Traffic is recv_oct, recv_cnt (frames), send_oct and send_cnt
	// (socket writes) with their rates.
	Traffic  []rate.Stat
	Channels []ChannelInfo
	// TLS is the connection's TLS state (AMQPS); nil for plain TCP.
	TLS *tls.ConnectionState
}

// ChannelInfo is one open channel.
type ChannelInfo struct {
	Number uint16
	// Prefetch is basic.qos with global=false (for consumers created
	// next), GlobalPrefetch with global=true (the whole channel).
	Prefetch, GlobalPrefetch int
	Confirm, Transactional   bool
	Unacknowledged           int // deliveries awaiting ack
	Unconfirmed              int // publishes awaiting their confirm
	// MessageStats is RabbitMQ's message_stats of a channel (stats.go).
	MessageStats []rate.Stat
	Consumers    []ConsumerInfo
}

// ConsumerInfo is one consumer (basic.consume) of a channel.
type ConsumerInfo struct {
	Tag, Queue             string
	AckRequired, Exclusive bool
	Prefetch               int
	Args                   amqpwire.Table
}

// Connections returns every connection past its handshake.
func (s *Server) Connections() []ConnectionInfo {
	now := time.Now()
	var out []ConnectionInfo
	s.eachConn(func(c *conn) {
		if c.opened.Load() {
			out = append(out, c.info(now))
		}
	})
	return out
}

// CloseConnection closes the named connection as RabbitMQ's management
// API does: connection.close 320 CONNECTION_FORCED with reason as its
// text, after which the client's unacknowledged deliveries go back to
// their queues. It reports whether such a connection was open.
func (s *Server) CloseConnection(name, reason string) bool {
	found := false
	s.eachConn(func(c *conn) {
		if !found && c.opened.Load() && c.name == name {
			found = true
			c.forceClose(reason)
		}
	})
	return found
}

// CloseVHostConnections closes every connection to vhost as
// CloseConnection does, as RabbitMQ does when a vhost is deleted.
func (s *Server) CloseVHostConnections(vhost, reason string) {
	s.closeWhere(func(c *conn) bool { return c.vhostName == vhost }, reason)
}

// CloseUserConnections closes every connection of user as
// CloseConnection does, as RabbitMQ does when a user is deleted.
func (s *Server) CloseUserConnections(user, reason string) {
	s.closeWhere(func(c *conn) bool { return c.user == user }, reason)
}

func (s *Server) closeWhere(match func(*conn) bool, reason string) {
	s.eachConn(func(c *conn) {
		if c.opened.Load() && match(c) {
			c.forceClose(reason)
		}
	})
}

// Resources is what the memory and disk alarms watch, and whether each is
// raised. A limit <= 0 means that alarm is off; DiskFree is -1 when it
// cannot be read (or no data directory is watched).
type Resources struct {
	MemoryUsed, MemoryLimit int64
	MemoryAlarm             bool
	DiskFree, DiskFreeLimit int64
	DiskAlarm               bool
}

// Resources reads the alarms' state.
func (s *Server) Resources() Resources {
	a := s.alarms
	r := Resources{
		MemoryUsed: s.reg.MemoryUsed(), MemoryLimit: a.memoryLimit.Load(),
		DiskFree: -1, DiskFreeLimit: a.diskLimit.Load(),
	}
	if s.cfg.DataDir != "" {
		r.DiskFree = freeDiskBytes(s.cfg.DataDir)
	}
	a.mu.Lock()
	r.MemoryAlarm, r.DiskAlarm = a.memory, a.disk
	a.mu.Unlock()
	return r
}

// info takes a snapshot of an open connection. The handshake's results
// are read-only once opened is set, which the caller has seen.
func (c *conn) info(now time.Time) ConnectionInfo {
	peerHost, peerPort := splitAddr(c.nc.RemoteAddr())
	host, port := splitAddr(c.nc.LocalAddr())
	traffic := []rate.Stat{
		{Name: "recv_oct", Value: int64(c.recv.n.Load())},
		{Name: "recv_cnt", Value: int64(c.framesRead.Load())},
		{Name: "send_oct", Value: int64(c.sent.n.Load())},
		{Name: "send_cnt", Value: int64(c.sent.cnt.Load())},
	}
	c.trafficRates.Sample(now, traffic)
	info := ConnectionInfo{
		Name: c.name, User: c.user, VHost: c.vhostName,
		PeerHost: peerHost, PeerPort: peerPort, Host: host, Port: port,
		AuthMechanism: c.mechanism, ConnectedAt: c.connectedAt, ClientProperties: c.clientProps,
		ChannelMax: c.channelMax, FrameMax: c.frameMax, Heartbeat: c.heartbeat,
		Blocked: c.readPaused.Load(), Traffic: traffic, TLS: c.tls,
	}
	for _, ch := range c.openChannels() {
		if ci, open := ch.info(now); open {
			info.Channels = append(info.Channels, ci)
		}
	}
	return info
}

// openChannels returns the connection's channels, in no order.
func (c *conn) openChannels() []*channel {
	c.chanMu.Lock()
	defer c.chanMu.Unlock()
	chans := make([]*channel, 0, len(c.channels))
	for _, ch := range c.channels {
		chans = append(chans, ch)
	}
	return chans
}

// info takes a snapshot of a channel; open is false once it is closed.
func (ch *channel) info(now time.Time) (info ChannelInfo, open bool) {
	ch.mu.Lock()
	if ch.closed {
		ch.mu.Unlock()
		return ChannelInfo{}, false
	}
	info = ChannelInfo{
		Number: ch.id, Prefetch: ch.consumerPrefetch, GlobalPrefetch: ch.prefetch,
		Transactional: ch.tx != nil, Unacknowledged: ch.unacked.len(),
	}
	for _, k := range ch.consumers {
		if k.queue == mq.ReplyToQueue {
			continue // direct reply-to's consumer consumes no queue: RabbitMQ lists it nowhere
		}
		info.Consumers = append(info.Consumers, ConsumerInfo{
			Tag: k.tag, Queue: k.queue, AckRequired: !k.noAck, Exclusive: k.exclusive, Prefetch: k.prefetch, Args: k.args,
		})
	}
	cf := ch.confirm
	ch.mu.Unlock()
	if cf != nil {
		info.Confirm, info.Unconfirmed = true, cf.unconfirmed()
	}
	info.MessageStats = messageStats(ch.stats.values(), &ch.rates, now)
	return info, true
}

// splitAddr returns an address's host and port ("", 0 if it has none).
func splitAddr(a net.Addr) (string, int) {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return "", 0
	}
	p, _ := strconv.Atoi(port)
	return host, p
}
