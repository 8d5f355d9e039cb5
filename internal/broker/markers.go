package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Transaction markers in a cluster. The transaction coordinator of an id
// runs on the leader of the id's partition of __transaction_state, which
// may hold no replica of, or only follow, the partitions its transaction
// wrote to. Kafka's coordinator sends WriteTxnMarkers to each partition's
// leader; Wharf forwards the marker over the cluster's own transport to
// the leader of the partition's Raft group, whose forward handler writes
// it through the partition (producer state, open transactions and all)
// as a local marker would be.

// markerRequest is a marker a node asks a partition's leader to write.
type markerRequest struct {
	ProducerID       int64 `json:"producer_id"`
	Epoch            int16 `json:"epoch"`
	Commit           bool  `json:"commit"`
	CoordinatorEpoch int32 `json:"coordinator_epoch"`
}

// markerForwardTimeout bounds a forwarded marker; the coordinator retries
// what fails.
const markerForwardTimeout = 10 * time.Second

// forwardMarker has the partition's leader write m.
func (p *Partition) forwardMarker(m markerRequest) error {
	leader, _, _ := p.Leadership(p.broker.cfg.NodeID)
	if leader < 0 || leader == p.broker.cfg.NodeID {
		return fmt.Errorf("%w: %s-%d has no leader to write a transaction marker", ErrNotLeader, p.topic.name, p.index)
	}
	data, err := json.Marshal(partitionForward{Marker: &m})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), markerForwardTimeout)
	defer cancel()
	if _, err := p.broker.cfg.Cluster.Forward(ctx, partitionGroup(p.topic.id, p.index), leader, data); err != nil {
		if strings.Contains(err.Error(), ErrInvalidProducerEpoch.Error()) {
			return fmt.Errorf("%w: node %d: %v", ErrInvalidProducerEpoch, leader, err)
		}
		return fmt.Errorf("%w: marker for %s-%d forwarded to node %d: %v", ErrNotLeader, p.topic.name, p.index, leader, err)
	}
	return nil
}

// TxnMarkerHook hears of a transaction marker once it is durable in a
// partition.
type TxnMarkerHook func(topic string, partition int32, producerID int64, commit bool)

// OnTxnMarker installs what hears of every transaction marker this node
// writes (the group coordinator applies or drops the offsets a
// transaction committed in __consumer_offsets).
func (b *Broker) OnTxnMarker(fn TxnMarkerHook) { b.markerHook.Store(&fn) }

func (b *Broker) txnMarkerWritten(p *Partition, producerID int64, commit bool) {
	if fn := b.markerHook.Load(); fn != nil {
		(*fn)(p.topic.name, p.index, producerID, commit)
	}
}
