package access

import "github.com/wharf-mq/wharf/internal/amqpwire"

// Principal is a user acting in one vhost: an AMQP connection, or one
// management API request. Its methods are the checks of the AMQP
// operations, in the order rabbit_channel makes them, returning
// RabbitMQ's 403 ACCESS_REFUSED *amqpwire.Error (a channel error).
//
// It remembers the checks that passed until any permission changes, so
// a publisher does not match expressions on every message. Not safe for
// concurrent use.
type Principal struct {
	store       *Store
	user, vhost string
	generation  uint64
	granted     map[resourceCheck]bool
}

type resourceCheck struct {
	perm Perm
	kind Kind
	name string
}

// rememberedChecks bounds what a Principal remembers; past it, it starts
// over.
const rememberedChecks = 64

// Principal returns user acting in vhost.
func (s *Store) Principal(user, vhost string) *Principal {
	return &Principal{store: s, user: user, vhost: vhost, granted: map[resourceCheck]bool{}}
}

// Check is RabbitMQ's check_resource_access: perm on a queue or exchange.
func (p *Principal) Check(perm Perm, kind Kind, name string) error {
	if kind == Exchange && name == "" {
		name = defaultExchange
	}
	// Load the generation before reading the permission: a change in
	// between then drops what is remembered next time.
	if gen := p.store.generation.Load(); gen != p.generation {
		clear(p.granted)
		p.generation = gen
	}
	k := resourceCheck{perm, kind, name}
	if p.granted[k] {
		return nil
	}
	if !p.store.allows(p.user, p.vhost, perm, name) {
		return refused(perm, kind, name, p.vhost, p.user)
	}
	if len(p.granted) >= rememberedChecks {
		clear(p.granted)
	}
	p.granted[k] = true
	return nil
}

// checkAny is what a passive declare needs: any of the three
// permissions. The refusal names configure, as a declare's does.
func (p *Principal) checkAny(kind Kind, name string) error {
	var err error
	for _, perm := range []Perm{Read, Write, Configure} {
		if err = p.Check(perm, kind, name); err == nil {
			return nil
		}
	}
	return err
}

// checkTopic is RabbitMQ's check_topic_access, for a topic exchange:
// perm on a routing key.
func (p *Principal) checkTopic(perm Perm, exchange, key string) error {
	if p.store.topicAllows(p.user, p.vhost, exchange, perm, key) {
		return nil
	}
	return amqpwire.Errorf(amqpwire.CodeAccessRefused,
		"%s access to topic '%s' in exchange '%s' in vhost '%s' refused for user '%s'", perm, key, exchange, p.vhost, p.user)
}

// DeclareQueue checks queue.declare of name: configure, or for a passive
// declare any permission. A new queue (exists is asked only then) with
// an x-dead-letter-exchange also needs read on itself and write on that
// exchange.
func (p *Principal) DeclareQueue(name string, passive bool, args amqpwire.Table, exists func() bool) error {
	if passive {
		return p.checkAny(Queue, name)
	}
	if err := p.Check(Configure, Queue, name); err != nil {
		return err
	}
	return p.checkReferenced(Queue, name, args, "x-dead-letter-exchange", exists)
}

// DeclareExchange checks exchange.declare of name, as DeclareQueue does
// a queue's, with the alternate-exchange argument in place of the
// dead-letter exchange.
func (p *Principal) DeclareExchange(name string, passive bool, args amqpwire.Table, exists func() bool) error {
	if passive {
		return p.checkAny(Exchange, name)
	}
	if err := p.Check(Configure, Exchange, name); err != nil {
		return err
	}
	return p.checkReferenced(Exchange, name, args, "alternate-exchange", exists)
}

// checkReferenced checks a new resource's argument naming an exchange
// messages go on to: read on the resource, write on that exchange.
func (p *Principal) checkReferenced(kind Kind, name string, args amqpwire.Table, arg string, exists func() bool) error {
	target, named := args[arg]
	if !named || exists() {
		return nil
	}
	if err := p.Check(Read, kind, name); err != nil {
		return err
	}
	targetName, _ := target.(string)
	if b, ok := target.([]byte); ok {
		targetName = string(b)
	}
	return p.Check(Write, Exchange, targetName)
}

// Delete checks queue.delete or exchange.delete: configure.
func (p *Principal) Delete(kind Kind, name string) error { return p.Check(Configure, kind, name) }

// ReadQueue checks basic.consume, basic.get and queue.purge: read.
func (p *Principal) ReadQueue(name string) error { return p.Check(Read, Queue, name) }

// Bind checks queue.bind, exchange.bind and their unbinds: write on the
// destination, read on the source, and when the source is a topic
// exchange (asked only when the user's topic permissions could tell)
// topic read on the binding key.
func (p *Principal) Bind(destKind Kind, destination, source, key string, sourceIsTopic func() bool) error {
	if err := p.Check(Write, destKind, destination); err != nil {
		return err
	}
	if err := p.Check(Read, Exchange, source); err != nil {
		return err
	}
	if p.store.narrowsTopic(p.user, p.vhost, source) && sourceIsTopic() {
		return p.checkTopic(Read, source, key)
	}
	return nil
}

// Publish checks basic.publish: write on the exchange, and when it is a
// topic exchange (asked only when the user's topic permissions could
// tell) topic write on every routing key the message carries (its own,
// CC and BCC).
func (p *Principal) Publish(exchange string, routingKeys func() []string, isTopic func() bool) error {
	if err := p.Check(Write, Exchange, exchange); err != nil {
		return err
	}
	if !p.store.narrowsTopic(p.user, p.vhost, exchange) || !isTopic() {
		return nil
	}
	for _, key := range routingKeys() {
		if err := p.checkTopic(Write, exchange, key); err != nil {
			return err
		}
	}
	return nil
}
