package broker

import (
	"context"
	"encoding/json"
	"errors"
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

// forwardMarker has the partition's leader write m. A leader that stops
// leading before it answers (killed, or handing over) is given up as soon
// as this node sees it, and the next leader is asked (atLeader), this
// node itself if it leads then. Writing a marker again is safe: the
// coordinator retries a marker that failed anyway, the transaction stays
// in PrepareCommit or PrepareAbort until every marker is written, so the
// producer cannot have opened another one on the partition meanwhile,
// and a second marker for a producer with no open transaction there ends
// nothing (readers skip control batches).
func (p *Partition) forwardMarker(m markerRequest) error {
	self := p.broker.cfg.NodeID
	if leader := p.liveLeader(); leader < 0 || leader == self {
		return fmt.Errorf("%w: %s-%d has no leader to write a transaction marker", ErrNotLeader, p.topic.name, p.index)
	}
	data, err := json.Marshal(partitionForward{Marker: &m})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), markerForwardTimeout)
	defer cancel()
	var asked int32
	err = p.atLeader(ctx, func(ctx context.Context, leader int32) error {
		asked = leader
		if leader == self {
			return p.writeMarkerHere(m)
		}
		_, err := p.broker.cfg.Cluster.Forward(ctx, partitionGroup(p.topic.id, p.index), leader, data)
		return err
	})
	switch {
	case err == nil, asked == self, errors.Is(err, ErrInvalidProducerEpoch), errors.Is(err, ErrNotLeader):
		return err // written, or refused here, or no leader left
	case strings.Contains(err.Error(), ErrInvalidProducerEpoch.Error()):
		return fmt.Errorf("%w: node %d: %v", ErrInvalidProducerEpoch, asked, err)
	}
	return fmt.Errorf("%w: marker for %s-%d forwarded to node %d: %v", ErrNotLeader, p.topic.name, p.index, asked, err)
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
