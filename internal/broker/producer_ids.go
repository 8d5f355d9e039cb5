package broker

import "fmt"

// Producer ids are handed out from blocks reserved in the metadata log, so
// an id is never given twice, even across a crash, without a metadata write
// per InitProducerId. A restart skips the rest of the block it was using.
const (
	producerIDsKey       = "producer-ids"
	producerIDsBlockSize = 1000
)

type producerIDsRecord struct {
	// BlockEnd is the first id not yet reserved.
	BlockEnd int64 `json:"block_end"`
}

// AllocateProducerID returns a producer id no producer has had before.
func (b *Broker) AllocateProducerID() (int64, error) {
	b.producerIDMu.Lock()
	defer b.producerIDMu.Unlock()
	if b.nextProducerID >= b.producerIDBlockEnd && b.cfg.Cluster != nil {
		if err := b.reserveClusterProducerIDs(); err != nil {
			return -1, fmt.Errorf("reserve producer ids: %w", err)
		}
	}
	if b.nextProducerID >= b.producerIDBlockEnd {
		end := b.nextProducerID + producerIDsBlockSize
		if err := b.meta.write(producerIDsKey, producerIDsRecord{BlockEnd: end}); err != nil {
			return -1, fmt.Errorf("reserve producer ids: %w", err)
		}
		b.producerIDBlockEnd = end
	}
	id := b.nextProducerID
	b.nextProducerID++
	return id, nil
}
