package httpapi

// lookedUp returns what find finds on this node; if it finds nothing,
// it catches up with the cluster (mq.Registry.CatchUp) and looks again.
// RabbitMQ keeps its definitions in one schema store, so any node of its
// cluster shows a vhost, exchange, queue or policy the moment another
// node made it; here a node applies another's definitions a replication
// round later, and behind a load balancer a GET or DELETE right after a
// PUT through another node would be 404. Only a miss waits for the
// cluster (a barrier: a write to the metadata log): a hit answers from
// this node at once. On a single node there is nothing to catch up with,
// and the miss stands.
func lookedUp[T any](s *Server, find func() (T, bool)) (T, bool) {
	found, ok := find()
	if !ok && s.reg.CatchUp() {
		found, ok = find()
	}
	return found, ok
}
