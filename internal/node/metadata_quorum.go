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

// catchUpMetadata waits until this node's replica of the metadata log is
// committed to its end: Raft keeps no commit index on disk, so after a
// restart only the group's leader, elected by a majority of voters, can
// tell it which of its records the cluster holds. Until then the node
// knows neither its topics nor its vhosts, and must not serve (nor write
// the definitions it would believe missing). After a whole-cluster stop
// the first node back waits for a second: as a KRaft broker waits for its
// controller quorum (server.max.startup.time.ms, unlimited by default),
// it keeps waiting, however long, saying every quorumWaitReport which
// voters it reaches, until a quorum forms or ctx ends (SIGTERM).
func catchUpMetadata(ctx context.Context, l *replica.RaftLog, voters []uint64, peerUp func(uint64) bool, logger *slog.Logger) error {
	if err := checkInitialCluster(voters, l.Replicas()); err != nil {
		l.Close()
		return err
	}
	started := time.Now()
	for {
		attempt, cancel := context.WithTimeout(ctx, quorumWaitReport)
		err := l.Commit(l.EndOffset()).Wait(attempt)
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
			logger.Warn("waiting for a quorum of the cluster's metadata group before serving; start more nodes of --initial-cluster",
				"voters", voters, "reachable", reachable(voters, peerUp), "need", len(voters)/2+1,
				"waited", time.Since(started).Round(time.Second))
		default:
			l.Close()
			return fmt.Errorf("node: metadata log: %w", err)
		}
	}
}

// checkInitialCluster refuses an --initial-cluster (initial) that names
// no majority of the voters this node's metadata replica already has
// (members): its data directory belongs to another cluster than the one
// it was told of. It could never reach a quorum of its own voters, and
// the nodes it was told of are not its group's members, so it would wait
// for good; it stops at once, saying why. A list that names a majority
// passes, whatever else it names: the voters in the log rule, as nodes
// joined (--join) or removed since the cluster was made change them.
func checkInitialCluster(initial, members []uint64) error {
	named := 0
	for _, m := range members {
		if slices.Contains(initial, m) {
			named++
		}
	}
	if named > len(members)/2 {
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
