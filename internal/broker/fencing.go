package broker

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wharf-mq/wharf/internal/record"
)

// Fencing a node removed while it was down or cut off (issue 13).
//
// A node applies its own removal like any record (nodeApplied). One
// that was down or cut off when it was removed never gets that record:
// the metadata group's leader took it out of the group and sends it
// nothing more, so its replica of the log stops before the removal, and
// it knows no leader to forward a write to. Left alone it would serve
// Kafka clients its stale metadata for good. So a node that knows no
// leader of the metadata group, or sees the group no longer count it,
// asks the other nodes whether it was removed (a call on the metadata
// group, which names the caller; every node answers from the metadata it
// applied, and a removal, once applied anywhere, is committed and for
// good); at start it asks while its replica catches up (catchUpMetadata),
// and Register asks whenever a registration fails. Told so, it fences itself as an
// applied removal does. The leader also refuses a forwarded write that
// only a removed node makes (its registration, a block of producer ids
// for it), naming the removal, rather than commit a record every node
// ignores.

// removalCheckInterval is how often a node that knows no leader of the
// metadata group asks the others whether it was removed, and how long it
// waits for their answers.
const removalCheckInterval = time.Second

// removalAnswer is a node's answer to another's question whether it was
// removed.
type removalAnswer struct {
	Removed bool `json:"removed"`
}

// answerRemovalCall is the metadata group's call handler: it tells node
// from whether the metadata applied here records its removal.
func (b *Broker) answerRemovalCall(_ context.Context, from uint64, _ []byte) ([]byte, error) {
	b.mu.RLock()
	removed := b.state.nodes[int32(from)].Removed
	b.mu.RUnlock()
	return json.Marshal(removalAnswer{Removed: removed})
}

// askRemoved asks peers, at once, whether node self was removed, and
// reports whether any says so; a peer that does not answer within
// removalCheckInterval counts as not saying so.
func askRemoved(ctx context.Context, cluster *ClusterConfig, group uint64, self int32, peers []int32) bool {
	if cluster.Call == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, removalCheckInterval)
	defer cancel()
	var removed atomic.Bool
	var wg sync.WaitGroup
	for _, peer := range peers {
		if peer == self {
			continue
		}
		wg.Go(func() {
			data, err := cluster.Call(ctx, group, peer, nil)
			var a removalAnswer
			if err == nil && json.Unmarshal(data, &a) == nil && a.Removed {
				removed.Store(true)
			}
		})
	}
	wg.Wait()
	return removed.Load()
}

// removalWatch, while the broker runs, asks the other nodes whether
// this node was removed whenever it knows no leader of the metadata
// group or the group does not count it, and fences it if so (a node
// that applied its removal too, once out of the group). It returns when
// ctx ends, which fencing does.
func (b *Broker) removalWatch(ctx context.Context) {
	ticker := time.NewTicker(removalCheckInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		if b.outOfMetadataGroup() && b.othersSayRemoved(ctx) {
			b.logger.Error("the other nodes say this node was removed from the cluster")
			b.fenceOutOfGroup()
		}
	}
}

// othersSayRemoved asks the other nodes whether this one was removed.
func (b *Broker) othersSayRemoved(ctx context.Context) bool {
	return askRemoved(ctx, b.cfg.Cluster, b.meta.raft.Group().ID(), b.cfg.NodeID, b.nodeIDs())
}

// outOfMetadataGroup reports whether this node knows no leader of the
// metadata group, or is no member of it as it knows it.
func (b *Broker) outOfMetadataGroup() bool {
	g := b.meta.raft.Group()
	m := g.Membership()
	self := uint64(b.cfg.NodeID)
	leader, _, _ := b.meta.raft.Leadership()
	return leader == 0 || !slices.Contains(m.Voters, self) && !slices.Contains(m.Learners, self)
}

// fenceRemoved makes this node's removal final here: written down
// (removedMarker), so that it refuses to start again, and Removed
// closed, so that it stops serving.
func (b *Broker) fenceRemoved() {
	b.removedOnce.Do(func() {
		if err := writeRemovedMarker(b.cfg.DataDir, b.cfg.NodeID); err != nil {
			b.logger.Error("recording this node's removal in its data directory failed", "err", err)
		}
		close(b.removed)
	})
}

// fenceOutOfGroup fences this node, which the others say was removed
// and which is out of the metadata group. Its metadata writes, those
// waiting included, fail with the removal at once: they could only wait
// out their timeout. (A node that applies its removal is still a member
// while the group lets it go, and finishes the writes in flight, its own
// removal's included; it starts none: metadataLog.propose.)
func (b *Broker) fenceOutOfGroup() {
	b.fenceRemoved()
	b.stopCluster(removedError(b.cfg.NodeID))
}

// metadataForwarded is the metadata group's forward handler, on its
// leader: it commits what another node forwarded, unless that is a
// write only a removed node makes (removedWriter), which it refuses
// with removedError.
func (b *Broker) metadataForwarded(ctx context.Context, data []byte) (int64, error) {
	if node, ok := b.removedWriter(data); ok {
		return -1, removedError(node)
	}
	// Once: a node that no longer leads answers so at once, and the
	// forwarding node tries the new leader (Propose), where passing it
	// on from here would keep both waiting until the write timed out.
	ctx, cancel := context.WithTimeout(ctx, b.meta.writeTimeout)
	defer cancel()
	return b.meta.raft.AppendCommitted(ctx, data)
}

// removedWriter finds, in a forwarded batch, a record only its own node
// writes (a broker registration, a block of producer ids) by a node the
// metadata records as removed.
func (b *Broker) removedWriter(batch []byte) (int32, bool) {
	var writers []int32
	for len(batch) > 0 {
		h, err := record.ParseHeader(batch)
		if err != nil || h.Size() > len(batch) {
			break
		}
		recs, _ := record.Records(batch[:h.Size()])
		for _, r := range recs {
			if node := writerOf(string(r.Key), r.Value); node > 0 {
				writers = append(writers, node)
			}
		}
		batch = batch[h.Size():]
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	for _, node := range writers {
		if b.state.nodes[node].Removed {
			return node, true
		}
	}
	return 0, false
}

// writerOf is the node that writes the record, for the records only that
// node writes (BrokerInfo, producerIDBlockRecord); 0 for the others.
func writerOf(key string, value []byte) int32 {
	if !strings.HasPrefix(key, brokerKeyPrefix) && !strings.HasPrefix(key, producerIDBlockKey) {
		return 0
	}
	var r struct {
		NodeID int32 `json:"node_id"`
		Node   int32 `json:"node"`
	}
	if json.Unmarshal(value, &r) != nil {
		return 0
	}
	return max(r.NodeID, r.Node)
}
