package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/wharf-mq/wharf/internal/raft"
)

// Announcing this node's cluster address to the nodes that dial it
// (issue 13).
//
// The transport's one connection per pair is dialled by the lower id
// (raft/tcp.go), so a node learns a higher node's address only from its
// address book or the metadata log, and applies no log before its
// metadata quorum forms. A node that was down while node 4 joined has
// no address for 4 in its book; after a whole-cluster stop, it and 4
// may be the quorum, and would wait for each other for good. So at
// start, until its broker opens, a node tells every lower node in its
// book where it listens, over the connection a join request uses (a
// joinRequest with Announce set). The receiver takes the address as a
// hint, as it takes its book's, and only for a node its metadata group
// counts as a member: an unknown or removed id is refused.

// The wait between two announcements to a node that could not take
// one yet doubles from announceFirstRetry to announceMaxRetry.
const (
	announceFirstRetry = 100 * time.Millisecond
	announceMaxRetry   = 2 * time.Second
)

// announcer sends this node's address to the lower nodes until each
// answered or stop is called (the broker opened, or the node stops).
type announcer struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startAnnouncer announces self at addr to every node in nodes with a
// lower id.
func startAnnouncer(ctx context.Context, self int32, addr net.Addr, nodes map[int32]string, logger *slog.Logger) *announcer {
	ctx, cancel := context.WithCancel(ctx)
	a := &announcer{cancel: cancel}
	req, err := json.Marshal(joinRequest{NodeID: self, Addr: addr.String(), Announce: true})
	if err != nil {
		panic(err) // a struct of an int and strings always marshals
	}
	for id, to := range nodes {
		if id >= self {
			continue
		}
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			announceTo(ctx, id, to, req, logger)
		}()
	}
	return a
}

// stop ends every announcement still retrying and waits for it.
func (a *announcer) stop() {
	if a != nil {
		a.cancel()
		a.wg.Wait()
	}
}

// announceTo sends req to node id at to, again with backoff while it
// cannot be reached or has not opened its metadata group (it cannot
// tell a member yet), until it answers or ctx ends.
func announceTo(ctx context.Context, id int32, to string, req []byte, logger *slog.Logger) {
	wait := announceFirstRetry
	for {
		_, err := raft.RequestJoin(ctx, to, req)
		switch {
		case err == nil:
			logger.Info("announced this node's cluster address", "to", id)
			return
		case errors.Is(err, raft.ErrJoinRefused) && !strings.Contains(err.Error(), errNotServingYet.Error()):
			logger.Warn("a node refused this node's cluster address", "to", id, "err", err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, announceMaxRetry)
	}
}

// takeAnnouncement sets where node req.NodeID listens, if members (the
// metadata group's voters and learners, as this node knows them) has it.
func takeAnnouncement(tr *raft.TCPTransport, self int32, members []uint64, req joinRequest) error {
	if req.NodeID == self || !slices.Contains(members, uint64(req.NodeID)) {
		return fmt.Errorf("node %d is no member of this node's cluster (members %v)", req.NodeID, members)
	}
	tr.SetPeer(uint64(req.NodeID), req.Addr)
	return nil
}
