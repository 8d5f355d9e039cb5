package amqp

import (
	"time"

	"github.com/wharf-mq/wharf/internal/mq"
)

// In a cluster a node applies the definitions other nodes make a
// replication round later; RabbitMQ keeps its definitions in one schema
// store, so any node of its cluster knows a vhost or exchange the moment
// another node made it. What a client names and this node does not know
// yet may thus have been made elsewhere just now: a lookup that misses
// catches up with the cluster (mq.Registry.CatchUp, a barrier on the
// metadata log) and looks again. A hit answers at once; on a single node
// there is nothing to catch up with and the miss stands. mq's own
// lookups by name (passive declares, binds and unbinds, consumes, gets,
// publishes, deletes) catch up the same way; these are the lookups made
// here, before mq is asked.

// lookUpVHost is the registry's vhost name, for connection.open, whose
// catch-up ends by the handshake's deadline: a node cut off from the
// metadata quorum refuses the client within its handshake timeout, as
// RabbitMQ's would, rather than when the catch-up gives up (barrierWait,
// 30 s: past the client's own timeout, which it reports as a failure of
// its own, not the refusal).
func (s *Server) lookUpVHost(name string, deadline time.Time) (*mq.VHost, error) {
	v, err := s.reg.VHost(name)
	if err != nil && s.reg.CatchUpWithin(time.Until(deadline)) {
		v, err = s.reg.VHost(name)
	}
	return v, err
}

// isTopicExchange reports whether the connection's vhost has a topic
// exchange of that name, for a topic permission's check (which applies to
// topic exchanges only). Without the catch-up, a bind or publish through
// this node to a topic exchange made elsewhere just now would skip the
// check that narrows it, and mq, catching up by itself, would then bind or
// route it.
func (c *conn) isTopicExchange(name string) bool {
	if !c.vhost.HasExchange(name) && !c.srv.reg.CatchUp() {
		return false
	}
	return c.vhost.IsTopicExchange(name)
}
