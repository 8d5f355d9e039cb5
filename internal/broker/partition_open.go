package broker

import (
	"fmt"
	"os"
	"sync"

	"github.com/wharf-mq/wharf/internal/replica"
)

// partitionOpeners bounds how many partitions the broker opens at once
// (Broker.openSlots). Opening
// is mostly waiting: for fsyncs when a partition is created or recovered
// after a crash, for reads of its segments' tails otherwise. Doing several
// at once overlaps those waits (Kafka's num.recovery.threads.per.data.dir
// does the same for recovery); more than a few only queues at the disk.
const partitionOpeners = 8

// openPartitions opens, in parallel, the count partitions of a topic the
// metadata log records. None fails: a partition whose directory or files
// cannot be read, or whose log is corrupt, is kept offline and logged, as
// Kafka does with a failed log directory, and the others serve.
func (b *Broker) openPartitions(t *Topic, count int32) []*Partition {
	cfg := t.currentConfig().logConfig()
	parts := make([]*Partition, count)
	b.inParallel(count, func(i int32) { parts[i] = b.openPartition(t, i, cfg) })
	return parts
}

func (b *Broker) openPartition(t *Topic, i int32, cfg replica.Config) *Partition {
	p := b.newPartition(t, i)
	err := b.checkPartitionDir(p.dir, t.id)
	if err == nil {
		p.log, err = b.openLog(t, i, p.dir, cfg)
	}
	if err == nil {
		if err = p.loadProducers(); err != nil {
			p.log.Close()
			p.log = nil
			err = fmt.Errorf("rebuild producer state of %s: %w", p.dir, err)
		}
	}
	if err != nil {
		p.offline = err
		b.logger.Error("partition offline", "topic", t.name, "partition", i, "err", err)
	}
	return p
}

// createPartitions creates partitions first to count-1 of t, in parallel,
// and makes their directories durable, for the caller to record in the
// metadata log next: the metadata never names a partition that does not
// exist. On an error nothing is left behind.
func (b *Broker) createPartitions(t *Topic, first, count int32) ([]*Partition, error) {
	cfg := t.currentConfig().logConfig()
	parts := make([]*Partition, count-first)
	errs := make([]error, count-first)
	b.inParallel(count-first, func(k int32) { parts[k], errs[k] = b.createPartition(t, first+k, cfg) })
	err := firstError(errs)
	if err == nil {
		if err = syncDir(b.cfg.DataDir); err != nil {
			err = fmt.Errorf("%w: sync %s: %v", ErrStorage, b.cfg.DataDir, err)
		}
	}
	if err != nil {
		b.discardPartitions(parts)
		return nil, err
	}
	return parts, nil
}

func (b *Broker) createPartition(t *Topic, i int32, cfg replica.Config) (*Partition, error) {
	p := b.newPartition(t, i)
	if err := b.createPartitionDir(p.dir, t.id); err != nil {
		return nil, fmt.Errorf("%w: create %s: %v", ErrStorage, p.dir, err)
	}
	log, err := b.openLog(t, i, p.dir, cfg)
	if err != nil {
		os.RemoveAll(p.dir)
		return nil, fmt.Errorf("%w: create %s: %v", ErrStorage, p.dir, err)
	}
	p.log = log
	if err := p.loadProducers(); err != nil {
		log.Delete()
		return nil, fmt.Errorf("%w: create %s: %v", ErrStorage, p.dir, err)
	}
	return p, nil
}

// discardPartitions removes partitions created for a topic or a partition
// count that was not recorded.
func (b *Broker) discardPartitions(parts []*Partition) {
	for _, p := range parts {
		if p != nil {
			p.log.Delete()
		}
	}
}

func (b *Broker) newPartition(t *Topic, i int32) *Partition {
	return &Partition{broker: b, topic: t, index: i, dir: b.partitionDir(t.name, i)}
}

// openLog opens partition i of t in dir: acknowledged per the broker's
// fsync policy and flushed by its flusher.
func (b *Broker) openLog(t *Topic, i int32, dir string, cfg replica.Config) (replica.Log, error) {
	l, err := replica.Open(dir, cfg, replica.Options{
		Fsync:   b.cfg.Fsync,
		Flusher: b.flusher,
		Logger:  b.logger.With("topic", t.name, "partition", i),
	})
	if err != nil {
		return nil, err // not a nil *Local in the interface: p.log == nil means offline
	}
	return l, nil
}

// inParallel runs fn(0) to fn(n-1), at most partitionOpeners at a time.
func (b *Broker) inParallel(n int32, fn func(int32)) {
	var wg sync.WaitGroup
	for i := range n {
		b.openSlots <- struct{}{}
		wg.Go(func() {
			defer func() { <-b.openSlots }()
			fn(i)
		})
	}
	wg.Wait()
}

func firstError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
