package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/wharf-mq/wharf/internal/replica"
)

// quorumWaitReport is how often a node waiting for its metadata quorum
// says so in its log.
const quorumWaitReport = 10 * time.Second

// removalCheck is how often a node waiting for its metadata quorum asks
// the others whether it was removed.
const removalCheck = time.Second

// catchUpMetadata waits until the metadata group has a leader and this
// node's replica of the metadata log is committed to its end: Raft keeps
// no commit index on disk, so after a restart only the group's leader,
// elected by a majority of voters, can tell it which of its records the
// cluster holds. Until then the node knows neither its topics nor its
// vhosts, and must not serve (nor write the definitions it would believe
// missing, which needs a quorum anyway, as a new cluster's first writes
// do). After a whole-cluster stop, or at a new cluster's first start, the
// first node up waits for a second: as a KRaft broker waits for its
// controller quorum (server.max.startup.time.ms, unlimited by default),
// it keeps waiting, however long, saying every quorumWaitReport which
// voters it reaches, until a quorum forms or ctx ends (SIGTERM). Every
// removalCheck meanwhile it asks the others whether it was removed
// (askRemoved): a node removed while it was down never gets a quorum, and
// stops with the removal instead.
func catchUpMetadata(ctx context.Context, l *replica.RaftLog, self uint64, voters []uint64, peerUp func(uint64) bool,
	askRemoved func(context.Context) error, logger *slog.Logger) error {
	if err := checkInitialCluster(self, voters, l.Replicas()); err != nil {
		l.Close()
		return err
	}
	started, reported := time.Now(), time.Now()
	for {
		attempt, cancel := context.WithTimeout(ctx, removalCheck)
		err := caughtUp(attempt, l)
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
			l.Close()
			return fmt.Errorf("node: stopped while waiting for a quorum of the metadata group: %w", ctx.Err())
		case errors.Is(err, context.DeadlineExceeded):
			if err := askRemoved(ctx); err != nil {
				l.Close()
				return err
			}
			if time.Since(reported) < quorumWaitReport {
				continue
			}
			reported = time.Now()
			logger.Warn("waiting for a quorum of the cluster's metadata group before serving; start more nodes of --initial-cluster",
				"voters", voters, "reachable", reachable(voters, peerUp), "need", len(voters)/2+1,
				"waited", time.Since(started).Round(time.Second))
		default:
			l.Close()
			return fmt.Errorf("node: metadata log: %w", err)
		}
	}
}

// caughtUp waits until l's group has a leader and l is committed to its
// end.
func caughtUp(ctx context.Context, l *replica.RaftLog) error {
	for {
		changed := l.Changed()
		if leader, _, _ := l.Leadership(); leader != 0 {
			return l.Commit(l.EndOffset()).Wait(ctx)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// checkInitialCluster refuses an --initial-cluster (initial) that names
// none of the other voters this node's metadata replica already has
// (members): its data directory belongs to another cluster than the one
// it was told of, whose nodes are not its group's members; it would wait
// for good for a quorum of voters it cannot even address. It stops at
// once, saying why. A list naming some of them passes, whatever else it
// names: the voters in the log rule, as nodes joined (--join) or removed
// since the cluster was made change them, and a node still short of a
// quorum says so while it waits (catchUpMetadata).
func checkInitialCluster(self uint64, initial, members []uint64) error {
	others := slices.DeleteFunc(slices.Clone(members), func(m uint64) bool { return m == self })
	if len(others) == 0 || slices.ContainsFunc(others, func(m uint64) bool { return slices.Contains(initial, m) }) {
		return nil
	}
	return fmt.Errorf("node: --initial-cluster names the nodes %v, but the cluster this data directory belongs to has the voters %v; "+
		"give this node that cluster's --initial-cluster (or an empty --data-dir to make a new node)", initial, members)
}

// reachable is the voters this node is in contact with (itself included,
// as peerUp says).
func reachable(voters []uint64, peerUp func(uint64) bool) []uint64 {
	var up []uint64
	for _, v := range voters {
		if peerUp(v) {
			up = append(up, v)
		}
	}
	return up
}
