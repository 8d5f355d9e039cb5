package subjectbridge

import (
	"testing"

	"github.com/wharf-mq/wharf/internal/mq"
	"github.com/wharf-mq/wharf/internal/subjects"
)

// TestRouteWithoutNATSInterestCostsNothing: an amq.topic publish whose key
// only the bridge's own interest (amq.topic's bindings) matches is not
// turned into a NATS message: no NATS client wants it.
func TestRouteWithoutNATSInterestCostsNothing(t *testing.T) {
	b := &Bridge{router: subjects.New(), interest: make(map[string]*patternInterest)}
	b.BindingAdded("orders.#")
	m := &mq.Message{Exchange: exchange, RoutingKey: "orders.created", Body: []byte("body")}
	if b.Route(m) {
		t.Fatal("a message with no NATS subscriber counts as taken by NATS")
	}
	subject := []byte(m.RoutingKey)
	lookup := testing.AllocsPerRun(100, func() { b.router.Match(subject) })
	if allocs := testing.AllocsPerRun(100, func() { b.Route(m) }); allocs > lookup+1 {
		t.Fatalf("%v allocations to route a message no NATS client wants, want at most the router lookup's %v and the subject's", allocs, lookup)
	}
}
