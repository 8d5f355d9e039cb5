package broker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/wharf-mq/wharf/internal/replica"
)

// quorumWaitReport is how often a node waiting at start for its metadata
// quorum says so in its log.
const quorumWaitReport = 10 * time.Second

// catchUpMetadata waits until the metadata group has a leader and l, this
// node's replica of its log, is committed to its end (and, on a node
// joining now, holds cluster.JoinedMetadataEnd): Raft keeps no commit
// index on disk, so after a restart only the group's leader, elected by a
// majority of voters, can tell a node which of its records the cluster
// holds. Until then the node knows neither its topics nor its vhosts,
// and must not serve (nor write the definitions it would believe
// missing, which needs a quorum anyway, as a new cluster's first writes
// do). After a whole-cluster stop, or at a new cluster's first start, the
// first node up waits for a second: as a KRaft broker waits for its
// controller quorum (server.max.startup.time.ms, unlimited by default),
// it keeps waiting, however long, saying every quorumWaitReport which of
// the group's voters it reaches, until a quorum forms or
// cluster.OpenContext ends (SIGTERM). Every removalCheckInterval
// meanwhile it asks the others whether it was removed: a node removed
// while it was down never gets a quorum, and fails with removedError
// instead.
func catchUpMetadata(l *replica.RaftLog, cluster *ClusterConfig, self int32, logger *slog.Logger) error {
	ctx := cmp.Or(cluster.OpenContext, context.Background())
	peers := slices.Collect(maps.Keys(cluster.NodeAddrs))
	started, reported := time.Now(), time.Now()
	for {
		attempt, cancel := context.WithTimeout(ctx, removalCheckInterval)
		err := caughtUp(attempt, l, cluster.JoinedMetadataEnd)
		cancel()
		switch {
		case err == nil:
			if waited := time.Since(started); waited >= quorumWaitReport {
				logger.Info("the metadata quorum formed; starting", "waited", waited.Round(time.Millisecond))
			}
			return nil
		case errors.Is(err, replica.ErrTruncated):
			// The leader replaced an uncommitted tail of this
			// replica: wait for the new end.
		case ctx.Err() != nil:
			return fmt.Errorf("stopped while waiting for a quorum of the metadata group: %w", ctx.Err())
		case errors.Is(err, context.DeadlineExceeded):
			if askRemoved(ctx, cluster, l.Group().ID(), self, peers) {
				return removedError(self)
			}
			if time.Since(reported) < quorumWaitReport {
				continue
			}
			reported = time.Now()
			voters := l.Group().Membership().Voters
			logger.Warn("waiting for a quorum of the cluster's metadata group before serving; start more of its voters",
				"voters", voters, "reachable", reachable(voters, cluster.PeerUp), "need", len(voters)/2+1,
				"waited", time.Since(started).Round(time.Second))
		default:
			return fmt.Errorf("metadata log: %w", err)
		}
	}
}

// caughtUp waits until l's group has a leader and l is committed to its
// end, and past atLeast.
func caughtUp(ctx context.Context, l *replica.RaftLog, atLeast int64) error {
	for {
		changed := l.Changed()
		if leader, _, _ := l.Leadership(); leader != 0 {
			if err := l.WaitHighWatermark(ctx, atLeast-1); err != nil {
				return err
			}
			return l.Commit(l.EndOffset()).Wait(ctx)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// reachable is the voters this node is in contact with (itself included,
// as peerUp says).
func reachable(voters []uint64, peerUp func(int32) bool) []uint64 {
	var up []uint64
	for _, v := range voters {
		if peerUp(int32(v)) {
			up = append(up, v)
		}
	}
	return up
}
