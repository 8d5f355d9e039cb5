package mq

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/wharf-mq/wharf/internal/mq/routing"
)

// VHost is a virtual host: a namespace of exchanges and queues.
//
// Definition changes (declare, delete, bind, unbind, auto-delete) are
// serialized by defMu, which is held across the definition store write;
// they take mu for writing only to change the maps, so publishers (which
// route under mu read-locked) are not held up by store fsyncs.
type VHost struct {
	r    *Registry
	name string

	defMu sync.Mutex

	mu        sync.RWMutex
	exchanges map[string]*exchange
	queues    map[string]*queue
	deleted   bool

	unroutable atomic.Uint64

	replies replyConsumers // direct reply-to (replyto.go)

	// policies by name; written with defMu held, polMu guards reads (a
	// leaf lock: nothing is taken while holding it).
	polMu    sync.RWMutex
	policies map[string]*policy
}

// predeclared are the exchanges every vhost has.
var predeclared = []ExchangeDef{
	{Name: "", Type: "direct", Durable: true},
	{Name: "amq.direct", Type: "direct", Durable: true},
	{Name: "amq.fanout", Type: "fanout", Durable: true},
	{Name: "amq.topic", Type: "topic", Durable: true},
	{Name: "amq.headers", Type: "headers", Durable: true},
	{Name: "amq.match", Type: "headers", Durable: true},
}

func newVHost(r *Registry, name string) *VHost {
	v := &VHost{r: r, name: name, exchanges: make(map[string]*exchange), queues: make(map[string]*queue),
		policies: make(map[string]*policy)}
	for _, d := range predeclared {
		kind, _ := routing.ParseKind(d.Type)
		x := newExchange(d, kind)
		x.builtin = true
		v.exchanges[d.Name] = x
	}
	return v
}

// Name returns the vhost's name.
func (v *VHost) Name() string { return v.name }

// Unroutable returns how many published messages reached no queue.
func (v *VHost) Unroutable() uint64 { return v.unroutable.Load() }

// Exchanges returns the definitions of all exchanges, sorted by name.
func (v *VHost) Exchanges() []ExchangeDef {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make([]ExchangeDef, 0, len(v.exchanges))
	for _, x := range v.exchanges {
		out = append(out, x.def)
	}
	slices.SortFunc(out, func(a, b ExchangeDef) int { return compareStrings(a.Name, b.Name) })
	return out
}

// Queues returns the state of all queues, sorted by name.
func (v *VHost) Queues() []QueueInfo {
	v.mu.RLock()
	qs := make([]*queue, 0, len(v.queues))
	for _, q := range v.queues {
		qs = append(qs, q)
	}
	v.mu.RUnlock()
	out := make([]QueueInfo, 0, len(qs))
	for _, q := range qs {
		out = append(out, q.info())
	}
	slices.SortFunc(out, func(a, b QueueInfo) int { return compareStrings(a.Name, b.Name) })
	return out
}

// BindingInfo describes one binding: from exchange Source to a queue or (if
// ToExchange) an exchange.
type BindingInfo struct {
	Source, Destination string
	ToExchange          bool
	Key                 string
	Args                map[string]any
}

// Bindings returns every explicit binding (the default exchange's implicit
// ones are not listed).
func (v *VHost) Bindings() []BindingInfo {
	v.mu.RLock()
	defer v.mu.RUnlock()
	var out []BindingInfo
	for _, x := range v.exchanges {
		if x.bindings == nil {
			continue
		}
		for _, b := range x.bindings.Bindings() {
			bi := BindingInfo{Source: x.def.Name, Key: b.Key, Args: b.Args}
			if b.Dest.q != nil {
				bi.Destination = b.Dest.q.name
			} else {
				bi.Destination, bi.ToExchange = b.Dest.x.def.Name, true
			}
			out = append(out, bi)
		}
	}
	slices.SortFunc(out, func(a, b BindingInfo) int {
		if c := compareStrings(a.Source, b.Source); c != 0 {
			return c
		}
		if c := compareStrings(a.Destination, b.Destination); c != 0 {
			return c
		}
		return compareStrings(a.Key, b.Key)
	})
	return out
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// lookupQueue returns the queue or a 404.
func (v *VHost) lookupQueue(name string) (*queue, error) {
	q := v.queue(name)
	if q == nil && v.r.catchUp(queueKey(v.name, name)) {
		q = v.queue(name)
	}
	if q == nil {
		return nil, errNotFound("queue", name, v.name)
	}
	return q, nil
}

func (v *VHost) queue(name string) *queue {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.queues[name]
}

func (v *VHost) exchange(name string) *exchange {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.exchanges[name]
}

// accessQueue returns the queue for an operation by conn: 404 if missing,
// crashed or on another node (with the queue then), 405 if it is another
// connection's exclusive queue.
func (v *VHost) accessQueue(name string, conn ConnID) (*queue, error) {
	q, err := v.lookupQueue(name)
	if err != nil {
		return nil, err
	}
	if q.crashed.Load() {
		return nil, errCrashed(name, v.name)
	}
	if q.def.Exclusive && q.def.Owner != conn { // another node's exclusive queue too
		return nil, errLocked(name, v.name)
	}
	if q.elsewhere() {
		return q, q.errElsewhere()
	}
	return q, nil
}

// destroy deletes every queue and exchange of a deleted vhost and its
// definitions.
func (v *VHost) destroy() error {
	v.defMu.Lock()
	v.mu.RLock()
	qs := make([]*queue, 0, len(v.queues))
	for _, q := range v.queues {
		qs = append(qs, q)
	}
	xs := make([]*exchange, 0, len(v.exchanges))
	for _, x := range v.exchanges {
		xs = append(xs, x)
	}
	v.mu.RUnlock()
	var firstErr error
	var cleanup deletions
	for _, q := range qs {
		if err := v.deleteQueueLocked(q, &cleanup); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	for _, x := range xs {
		if x.builtin {
			continue
		}
		if err := v.deleteExchangeLocked(x, &cleanup); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	v.mu.Lock()
	v.deleted = true
	v.mu.Unlock()
	if err := v.deletePoliciesLocked(); err != nil && firstErr == nil {
		firstErr = err
	}
	if err := v.r.defs.Delete(vhostKey(v.name)); err != nil && firstErr == nil {
		firstErr = errInternal("delete vhost", err)
	}
	v.defMu.Unlock()
	cleanup.run(v.r)
	return firstErr
}
