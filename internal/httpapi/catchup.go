package httpapi

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"
)

// lookedUp returns what find finds on this node; if it finds nothing,
// it catches up with the cluster (mq.Registry.CatchUpWithin) and looks
// again. RabbitMQ keeps its definitions in one schema store, so any
// node of its cluster shows a vhost, exchange, queue or policy the
// moment another node made it; here a node applies another's definitions
// a replication round later, and behind a load balancer a GET or DELETE
// right after a PUT through another node would be 404. Only a miss waits for the
// cluster (a barrier: a write to the metadata log): a hit answers from
// this node at once. On a single node there is nothing to catch up with,
// and the miss stands.
//
// A request catches up once at most (catchUpOnce): a barrier started
// after the request came serves every lookup it makes after it, so a
// later miss of the same request stands too. A 404 then costs one
// write to the metadata log, not one for each lookup on its way (the
// user's vhost check and the handler's, a vhost and then an object), and
// a node cut off from the metadata quorum makes it wait one catch-up,
// lookupWait at most.
func lookedUp[T any](s *Server, r *http.Request, find func() (T, bool)) (T, bool) {
	found, ok := find()
	if !ok && catchUpOnce(r) && s.reg.CatchUpWithin(s.lookupWait) {
		found, ok = find()
	}
	return found, ok
}

// caughtUpKey is the context key of a request's catch-up: an
// *atomic.Bool set once the request tried one.
type caughtUpKey struct{}

// withCatchUp gives a request's context a catch-up of its own.
func withCatchUp(ctx context.Context) context.Context {
	return context.WithValue(ctx, caughtUpKey{}, new(atomic.Bool))
}

// catchUpOnce reports whether r may catch up: it has not tried yet (its
// context has none of its own: every time).
func catchUpOnce(r *http.Request) bool {
	tried, ok := r.Context().Value(caughtUpKey{}).(*atomic.Bool)
	return !ok || !tried.Swap(true)
}

// lookupWait bounds how long a lookup that misses waits for the
// cluster: of a user or a permission (the login, the checks of authz.go,
// the user and permission endpoints: users.Store, access.Store) and of a
// definition (lookedUp, and findBinding's catch-up). The API has no
// write timeout of its own, and on a node cut off from the metadata
// quorum that wait would be the metadata write timeout (30 s): a client
// would wait that long for its 401 or 404, if it waited at all. It is
// Kafka SASL's bound (5 s): several Raft election timeouts (1 s) long, so
// a catch-up through a quorum that is there still finds what was made
// elsewhere just now. A lookup that hits never waits.
const lookupWait = 5 * time.Second

// lookupContext bounds one lookup of r's (lookupWait); a client that
// goes away ends it too.
func (s *Server) lookupContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), s.lookupWait)
}
