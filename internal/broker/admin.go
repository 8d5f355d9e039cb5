package broker

import (
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"os"

	"github.com/wharf-mq/wharf/internal/record"
)

// TopicSpec describes a topic to create. Partitions <= 0 means the broker's
// default (num.partitions).
type TopicSpec struct {
	Name       string
	Partitions int32
	Configs    map[string]string
	// ReplicationFactor is how many replicas each partition has in a
	// cluster (<= 0: min(3, nodes)); more than the nodes is
	// ErrInvalidReplicationFactor. A single node ignores it.
	ReplicationFactor int16
}

// maxPartitions bounds one topic's partition count; each partition is a
// directory with open files.
const maxPartitions = 10000

// CreateTopic creates a topic and its partition logs. With validateOnly it
// only checks the spec and returns the topic it would create, with its
// configs but without partitions. The broker's own topics' names are
// refused (see CreateInternalTopic).
func (b *Broker) CreateTopic(spec TopicSpec, validateOnly bool) (*Topic, error) {
	if spec.Name == metadataTopic || internalTopics[spec.Name] {
		return nil, fmt.Errorf("%w: Creation of internal topic %s is prohibited.", ErrInvalidRequest, spec.Name)
	}
	return b.createTopic(spec, validateOnly)
}

// CreateInternalTopic creates __consumer_offsets or __transaction_state,
// for the coordinator that keeps its records there.
func (b *Broker) CreateInternalTopic(spec TopicSpec) (*Topic, error) {
	if !internalTopics[spec.Name] {
		return nil, fmt.Errorf("%w: %q is not an internal topic", ErrInvalidTopic, spec.Name)
	}
	return b.createTopic(spec, false)
}

func (b *Broker) createTopic(spec TopicSpec, validateOnly bool) (*Topic, error) {
	if err := validTopicName(spec.Name); err != nil {
		return nil, err
	}
	if spec.Partitions <= 0 {
		spec.Partitions = b.cfg.DefaultPartitions
	}
	if spec.Partitions > maxPartitions {
		return nil, fmt.Errorf("%w: %d partitions, at most %d", ErrInvalidPartitions, spec.Partitions, maxPartitions)
	}
	if err := validateTopicConfigs(spec.Configs); err != nil {
		return nil, err
	}
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	if _, err := b.Topic(spec.Name); err == nil {
		return nil, fmt.Errorf("%w: %q", ErrTopicExists, spec.Name)
	}
	if err := b.checkCollision(spec.Name); err != nil {
		return nil, err
	}
	rec := topicRecord{Name: spec.Name, Partitions: spec.Partitions, Configs: maps.Clone(spec.Configs)}
	rf, err := b.replicationFactor(spec.ReplicationFactor)
	if err != nil && b.cfg.Cluster != nil {
		return nil, err
	}
	if validateOnly {
		return b.newTopic(rec), nil
	}
	rand.Read(rec.ID[:])
	if b.cfg.Cluster != nil {
		rec.Replicas = b.assignReplicas(0, rec.Partitions, rf)
		return b.writeClusterTopic(rec)
	}
	t := b.newTopic(rec)
	parts, err := b.createPartitions(t, 0, rec.Partitions)
	if err != nil {
		return nil, err
	}
	if err := b.meta.write(topicKey(rec.Name), rec); err != nil {
		b.discardPartitions(parts)
		return nil, err
	}
	t.partitions = parts
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		// Recorded: it is there after a restart. Close the logs cleanly.
		for _, p := range parts {
			p.log.Close()
		}
		return nil, ErrClosed
	}
	b.addTopicLocked(t)
	b.logger.Info("topic created", "topic", t.name, "partitions", rec.Partitions)
	return t, nil
}

// DeleteTopic removes a topic and its data, unless the broker keeps it: an
// internal topic, or the log of a stream queue (Config.TopicInUse), which
// only deleting the queue removes (the queue's consumers then get
// basic.cancel).
func (b *Broker) DeleteTopic(name string) error {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	t, err := b.Topic(name)
	if err != nil {
		return err
	}
	if err := refuseIfInternal(t, "it cannot be deleted"); err != nil {
		return err
	}
	if user, ok := b.topicInUse(name); ok {
		return fmt.Errorf("%w: %s is the log of stream %s; delete the queue instead", ErrProtectedTopic, name, user)
	}
	return b.deleteTopicLocked(t)
}

// DeleteTopicInUse deletes a topic whatever Config.TopicInUse says, for
// its user itself: the stream bridge, when the stream queue that owns the
// topic is deleted. A missing topic is not an error.
func (b *Broker) DeleteTopicInUse(name string) error {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	t, err := b.Topic(name)
	if errors.Is(err, ErrUnknownTopic) {
		return nil
	}
	if err != nil {
		return err
	}
	return b.deleteTopicLocked(t)
}

// topicInUse asks Config.TopicInUse, if installed.
func (b *Broker) topicInUse(name string) (user string, inUse bool) {
	if b.cfg.TopicInUse == nil {
		return "", false
	}
	return b.cfg.TopicInUse(name)
}

// deleteTopicLocked records t's deletion, then removes its data. The caller
// holds adminMu.
func (b *Broker) deleteTopicLocked(t *Topic) error {
	name := t.name
	if err := b.meta.writeBatch([]record.Record{topicTombstone(t.record())}); err != nil {
		return err
	}
	if b.cfg.Cluster != nil {
		return nil // applied: gone on every replica (reconcileTopic)
	}
	b.mu.Lock()
	b.deletedTopics[t.id] = true
	b.removeTopicLocked(t)
	b.mu.Unlock()
	var errs []error
	for _, p := range t.Partitions() {
		if p.log != nil {
			errs = append(errs, p.log.Delete())
		} else if owner, found, _ := dirOwner(p.dir); found && owner == t.id {
			// Offline: its directory goes if it is this topic's.
			errs = append(errs, os.RemoveAll(p.dir))
		}
		p.wakeWaiters()
	}
	b.logger.Info("topic deleted", "topic", name)
	return errors.Join(errs...)
}

// CreatePartitions raises a topic's partition count to total.
func (b *Broker) CreatePartitions(name string, total int32, validateOnly bool) error {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	t, err := b.Topic(name)
	if err != nil {
		return err
	}
	if err := refuseIfInternal(t, "its partition count cannot change"); err != nil {
		return err
	}
	if user, ok := b.topicInUse(name); ok {
		return fmt.Errorf("%w: %s is the log of stream %s, which has one partition", ErrInvalidPartitions, name, user)
	}
	have := int32(len(t.Partitions()))
	switch {
	case total < have:
		return fmt.Errorf("%w: %s has %d partitions; the count can only grow", ErrInvalidPartitions, name, have)
	case total == have:
		return fmt.Errorf("%w: %s already has %d partitions", ErrInvalidPartitions, name, have)
	case total > maxPartitions:
		return fmt.Errorf("%w: %d partitions, at most %d", ErrInvalidPartitions, total, maxPartitions)
	}
	if validateOnly {
		return nil
	}
	if b.cfg.Cluster != nil {
		rec := t.record()
		rec.Partitions = total
		rec.Replicas = append(rec.Replicas, b.assignReplicas(have, total, len(rec.Replicas[0]))...)
		_, err := b.writeClusterTopic(rec)
		return err
	}
	parts, err := b.createPartitions(t, have, total)
	if err != nil {
		return err
	}
	rec := t.record()
	rec.Partitions = total
	if err := b.meta.write(topicKey(name), rec); err != nil {
		b.discardPartitions(parts)
		return err
	}
	t.mu.Lock()
	t.partitions = append(t.partitions, parts...)
	t.mu.Unlock()
	return nil
}

// AlterTopicConfigs changes a topic's config overrides. With incremental
// false, set replaces the whole override set (AlterConfigs); with
// incremental true, a non-nil value sets a config and a nil one returns it to
// its default (IncrementalAlterConfigs SET and DELETE).
func (b *Broker) AlterTopicConfigs(name string, set map[string]*string, incremental, validateOnly bool) error {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	t, err := b.Topic(name)
	if err != nil {
		return err
	}
	if err := refuseIfInternal(t, "its configs cannot change"); err != nil {
		return err
	}
	overrides := map[string]string{}
	if incremental {
		overrides = maps.Clone(t.currentConfig().overrides)
		if overrides == nil {
			overrides = map[string]string{}
		}
	}
	for k, v := range set {
		if v == nil {
			if _, known := topicConfigDefs[k]; !known {
				return fmt.Errorf("%w: unknown topic config %q", ErrInvalidConfig, k)
			}
			delete(overrides, k)
			continue
		}
		overrides[k] = *v
	}
	if err := validateTopicConfigs(overrides); err != nil {
		return err
	}
	if validateOnly {
		return nil
	}
	rec := t.record()
	rec.Configs = overrides
	if err := b.meta.write(topicKey(name), rec); err != nil {
		return err
	}
	if b.cfg.Cluster != nil {
		return nil // applied (reconcileTopic)
	}
	t.mu.Lock()
	t.config.overrides = overrides
	cfg := t.config
	parts := t.partitions
	t.mu.Unlock()
	for _, p := range parts {
		if p.log != nil {
			p.log.SetConfig(cfg.logConfig())
		}
	}
	return nil
}

func (b *Broker) newTopic(rec topicRecord) *Topic {
	return &Topic{
		name: rec.Name,
		id:   rec.ID,
		config: topicConfig{
			overrides: rec.Configs,
			defaults:  b.topicDefaults(rec.replicationFactor()),
		},
	}
}
