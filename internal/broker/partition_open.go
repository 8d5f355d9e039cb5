package broker

import (
	"errors"
	"fmt"
	"sync"

	"github.com/wharf-mq/wharf/internal/seglog"
)

// partitionOpeners bounds how many partitions the broker opens at once
// (Broker.openSlots). Opening
// is mostly waiting: for fsyncs when a partition is created or recovered
// after a crash, for reads of its segments' tails otherwise. Doing several
// at once overlaps those waits (Kafka's num.recovery.threads.per.data.dir
// does the same for recovery); more than a few only queues at the disk.
const partitionOpeners = 8

// openPartitions opens (creating where needed) partitions up to count, in
// parallel. On an error, the partitions before the first failing one are
// kept, as if they had been opened one by one, and the rest are closed.
func (b *Broker) openPartitions(t *Topic, count int32) error {
	cfg := t.currentConfig().logConfig()
	first := int32(len(t.Partitions()))
	if count <= first {
		return nil
	}
	opened := make([]*Partition, count-first)
	errs := make([]error, count-first)
	var wg sync.WaitGroup
	for i := first; i < count; i++ {
		b.openSlots <- struct{}{}
		wg.Go(func() {
			defer func() { <-b.openSlots }()
			opened[i-first], errs[i-first] = b.openPartition(t, i, cfg)
		})
	}
	wg.Wait()
	for k, p := range opened {
		if errs[k] != nil {
			for _, rest := range opened[k+1:] {
				if rest != nil && rest.log != nil {
					rest.log.Close()
				}
			}
			return errs[k]
		}
		t.mu.Lock()
		t.partitions = append(t.partitions, p)
		t.mu.Unlock()
	}
	return nil
}

// openPartition opens partition i of t. A corrupt log leaves the partition
// offline rather than failing the broker.
func (b *Broker) openPartition(t *Topic, i int32, cfg seglog.Config) (*Partition, error) {
	p := &Partition{topic: t, index: i, dir: b.partitionDir(t.name, i), fsync: b.cfg.Fsync, flushSoon: b.flushSoon}
	if err := claimPartitionDir(p.dir, t.id); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrStorage, p.dir, err)
	}
	p.log, p.offline = seglog.Open(p.dir, cfg, b.logger.With("topic", t.name, "partition", i))
	if p.offline != nil {
		var corrupt *seglog.CorruptionError
		if !errors.As(p.offline, &corrupt) {
			return nil, fmt.Errorf("%w: open %s: %v", ErrStorage, p.dir, p.offline)
		}
		b.logger.Error("partition offline", "topic", t.name, "partition", i, "err", p.offline)
		p.log = nil
	} else if err := p.loadProducers(); err != nil {
		p.log.Close()
		return nil, fmt.Errorf("%w: rebuild producer state of %s: %v", ErrStorage, p.dir, err)
	}
	return p, nil
}

// closePartitions closes the logs of topics that will not be served (a
// failed start-up).
func (b *Broker) closePartitions(topics []*Topic) {
	for _, t := range topics {
		for _, p := range t.Partitions() {
			if p.log != nil {
				p.log.Close()
			}
		}
	}
}
