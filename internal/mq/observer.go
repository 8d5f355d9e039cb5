package mq

import "errors"

// ExchangeObserver lets subscribers outside the queueing core share an
// exchange's routing: the node installs one on amq.topic of vhost "/"
// (internal/subjectbridge), through which NATS subscribers receive what
// the exchange routes and NATS publishers reach the exchange's bindings.
type ExchangeObserver interface {
	// BindingAdded and BindingRemoved report each binding whose source
	// is the exchange, by binding key, as it comes and goes; the
	// bindings there when the observer is installed come first, as
	// added. They run in the order of the changes, with the vhost's lock
	// held: they must not block, nor call into this package.
	BindingAdded(key string)
	BindingRemoved(key string)
	// Route is given each message the exchange routes, whether published
	// to it or reaching it through an exchange-to-exchange binding, as an
	// alternate exchange or as a dead letter, except those whose Origin
	// is the observer itself. It runs on the publisher's goroutine with no
	// lock held, must not keep m, and reports whether a subscriber took
	// the message; if one did, the publish counts as routed (no
	// basic.return for a mandatory message).
	Route(m *Message) bool
}

// ObserveExchange installs o on the exchange name, which must exist (404)
// and have no observer yet; the default exchange cannot be observed.
func (v *VHost) ObserveExchange(name string, o ExchangeObserver) error {
	v.defMu.Lock()
	defer v.defMu.Unlock()
	v.mu.Lock()
	defer v.mu.Unlock()
	x := v.exchanges[name]
	switch {
	case x == nil || v.deleted:
		return errNotFound("exchange", name, v.name)
	case x.bindings == nil:
		return errDefaultExchange()
	case x.observer != nil:
		return errors.New("mq: " + resource("exchange", name, v.name) + " is observed already")
	}
	x.observer = o
	for _, b := range x.bindings.Bindings() {
		o.BindingAdded(b.Key)
	}
	return nil
}

// routeOutside gives m to the observer routing reached, unless m came
// from it, and reports whether a subscriber took it.
func routeOutside(o ExchangeObserver, m *Message) bool {
	return o != nil && m.Origin != o && o.Route(m)
}
