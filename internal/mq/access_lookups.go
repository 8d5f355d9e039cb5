package mq

import "github.com/wharf-mq/wharf/internal/mq/routing"

// What the front ends' permission checks (internal/access) need to know
// of a vhost, cheaply enough to ask per publish.

// IsTopicExchange reports whether the vhost has a topic exchange of that
// name: topic permissions apply to topic exchanges only.
func (v *VHost) IsTopicExchange(name string) bool {
	v.mu.RLock()
	defer v.mu.RUnlock()
	x := v.exchanges[name]
	return x != nil && x.kind == routing.Topic
}

// HasExchange reports whether the vhost has an exchange of that name.
func (v *VHost) HasExchange(name string) bool {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.exchanges[name] != nil
}

// HasQueue reports whether the vhost has a queue of that name.
func (v *VHost) HasQueue(name string) bool {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.queues[name] != nil
}

// RoutingKeys returns every routing key the message is published with:
// its own, then those of its CC and BCC headers.
func (m *Message) RoutingKeys() []string {
	keys, _ := routingKeys(m)
	return keys
}

// ServerQueueName returns a name of the form DeclareQueue gives a queue
// declared without one ("amq.gen-" and 22 random characters), for
// checking a permission on that name before declaring.
func ServerQueueName() string { return serverQueueName() }
