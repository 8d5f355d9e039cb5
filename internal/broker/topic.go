package broker

import (
	"fmt"
	"strings"
	"sync"
)

// Topic is a named, partitioned log.
type Topic struct {
	name string
	id   [16]byte

	mu         sync.RWMutex
	partitions []*Partition
	config     topicConfig
}

// Name is the topic's name.
func (t *Topic) Name() string { return t.name }

// ID is the topic's UUID (KIP-516), fixed at creation.
func (t *Topic) ID() [16]byte { return t.id }

// internalTopics are the topics the broker itself writes, as Kafka's own;
// any other name, even one starting with "__", is an ordinary user topic.
// Only the broker's coordinators create them (CreateInternalTopic), and no
// client can delete or reshape them (refuseIfInternal). The metadata log
// is no topic, but its directory is partition 0 of metadataTopic, a name
// no client may create either. Every other directory a topic gets is
// "<name>-<partition>", which none of the data directory's own entries
// (queues/, .lock, the *-stray directories) can be.
var internalTopics = map[string]bool{"__consumer_offsets": true, "__transaction_state": true}

// Internal reports whether the topic belongs to the broker.
func (t *Topic) Internal() bool { return internalTopics[t.name] }

// Partitions returns the topic's partitions in index order.
func (t *Topic) Partitions() []*Partition {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.partitions
}

// Partition returns partition i.
func (t *Topic) Partition(i int32) (*Partition, error) {
	ps := t.Partitions()
	if i < 0 || int(i) >= len(ps) {
		return nil, fmt.Errorf("%w: %s has no partition %d", ErrUnknownPartition, t.name, i)
	}
	return ps[i], nil
}

// Configs returns every topic config Wharf knows, with the effective value.
func (t *Topic) Configs() []ConfigEntry {
	return t.currentConfig().entries()
}

func (t *Topic) currentConfig() topicConfig {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.config
}

func (t *Topic) record() topicRecord {
	t.mu.RLock()
	defer t.mu.RUnlock()
	rec := topicRecord{Name: t.name, ID: t.id, Partitions: int32(len(t.partitions)), Configs: t.config.overrides}
	for _, p := range t.partitions {
		if r := p.Replicas(); r != nil {
			rec.Replicas = append(rec.Replicas, r)
		}
	}
	return rec
}

// refuseIfInternal refuses a change to an internal topic: the group and
// transaction coordinators find their records by hashing into its
// partitions and rely on compaction, not retention, to keep them, so
// deleting it, changing its partition count or its configs would lose
// every group's offsets or every transaction's state. Kafka's own tools
// refuse to delete these topics; like Redpanda's protected topics, Wharf
// refuses at the broker, whatever the client. what says what is refused.
func refuseIfInternal(t *Topic, what string) error {
	if t.Internal() {
		return fmt.Errorf("%w: %s is internal to the broker: %s", ErrProtectedTopic, t.name, what)
	}
	return nil
}

// checkCollision refuses a new topic whose name collides with an existing
// topic's once '.' and '_' are read as one, as Kafka does (their metric
// names would be the same). The caller holds adminMu.
func (b *Broker) checkCollision(name string) error {
	b.mu.RLock()
	other, taken := b.byCollisionName[collisionName(name)]
	b.mu.RUnlock()
	if taken && other.name != name {
		return fmt.Errorf("%w: Topic '%s' collides with existing topic: %s", ErrInvalidTopic, name, other.name)
	}
	return nil
}

// collisionName is a topic name with '.' read as '_'.
func collisionName(name string) string { return strings.ReplaceAll(name, ".", "_") }

// validTopicName applies Kafka's rules for topic names.
func validTopicName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: the name is empty", ErrInvalidTopic)
	case name == "." || name == "..":
		return fmt.Errorf("%w: %q is not allowed", ErrInvalidTopic, name)
	case len(name) > 249:
		return fmt.Errorf("%w: the name is %d characters, more than 249", ErrInvalidTopic, len(name))
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %q has character %q; only [a-zA-Z0-9._-] are allowed", ErrInvalidTopic, name, c)
		}
	}
	return nil
}
