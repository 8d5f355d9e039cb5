package broker

import (
	"fmt"
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
	return topicRecord{Name: t.name, ID: t.id, Partitions: int32(len(t.partitions)), Configs: t.config.overrides}
}

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
