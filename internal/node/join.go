package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"strings"
	"time"

	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/raft"
)

// Joining a running cluster (`wharf serve --join HOST:PORT`).
//
// The new node sends a joinRequest to the member at HOST:PORT over the
// cluster transport (raft/join.go). The member records the node in the
// metadata log (broker.AddNode, which every node applies: their
// transports learn its address, and the controller adds it to the
// metadata group as a learner) and answers with every node's cluster
// address and the end of the metadata log. The new node then opens an
// empty replica of the metadata log, which the controller fills, and
// starts its broker once the replica reaches that end: it knows every
// topic and node by then. From then on it is a broker like any other: it
// registers its Kafka address, appears in Metadata, and new partitions
// are placed on it.
//
// Started again (--join stays on its command line), a joined node that
// has served finds the cluster's nodes in its address book
// (broker.ReadAddressBook) and asks nothing: it starts as a node of the
// initial cluster does, from what its data directory holds, and waits
// for its metadata quorum, which may need it (a joined node promoted to
// a voter) while its member, waiting too, cannot answer. Only a node
// that never served, or whose cluster address changed, asks to join
// again (and is refused in the second case: its id is another
// address's).

// joinRequest is what a joining node sends.
type joinRequest struct {
	NodeID int32  `json:"node_id"`
	Addr   string `json:"addr"` // its cluster address
	// Announce: a member only tells where it listens (announce.go).
	Announce bool `json:"announce,omitempty"`
}

// joinReply is what a member answers a joinRequest accepted.
type joinReply struct {
	Nodes       map[int32]string `json:"nodes"`
	MetadataEnd int64            `json:"metadata_end"`
}

// errNotServingYet is a member's answer to a join request before its
// broker is open: after a whole-cluster stop a member waits for its
// metadata quorum, which may need the joining node's peers. The joining
// node asks again; the transport carries it as a refusal, so join tells
// it from one by its text.
var errNotServingYet = errors.New("this node does not serve yet (it waits for its metadata quorum); ask again")

// errJoinNotRecorded is a member's answer to a join request whose record
// it could not write to the metadata log: while the metadata group
// elects a leader (its leader just died), or has no quorum. The joining
// node asks again, as a KRaft broker keeps trying its controllers.
var errJoinNotRecorded = errors.New("this node could not record the join in the metadata log yet; ask again")

// joinWaitReport is how often a node that cannot join yet says so.
const joinWaitReport = 10 * time.Second

// join asks the member at member to take node self, listening at addr,
// in. It retries while the member cannot be reached or does not serve yet
// (it may be starting too, or waiting for its metadata quorum after a
// whole-cluster stop) or cannot record the join yet (its metadata group
// elects a leader), for as long as that takes, as a KRaft broker keeps
// trying its controllers, until ctx ends; not once it refused. It says so every joinWaitReport.
func join(ctx context.Context, member string, self int32, addr net.Addr, logger *slog.Logger) (joinReply, error) {
	if ta, ok := addr.(*net.TCPAddr); ok && ta.IP.IsUnspecified() {
		return joinReply{}, fmt.Errorf("node: --cluster-addr %s names no host the other nodes can reach; a joining node must give one", addr)
	}
	req, err := json.Marshal(joinRequest{NodeID: self, Addr: addr.String()})
	if err != nil {
		return joinReply{}, err
	}
	var warned time.Time
	for {
		answer, err := raft.RequestJoin(ctx, member, req)
		if err == nil {
			var reply joinReply
			if err := json.Unmarshal(answer, &reply); err != nil {
				return joinReply{}, fmt.Errorf("node: the join reply of %s: %w", member, err)
			}
			logger.Info("joined the cluster", "via", member, "nodes", reply.Nodes)
			return reply, nil
		}
		if errors.Is(err, raft.ErrJoinRefused) && !askAgain(err) {
			return joinReply{}, fmt.Errorf("node: %s refused to let node %d join: %w", member, self, err)
		}
		if time.Since(warned) >= joinWaitReport {
			logger.Warn("cannot reach the cluster to join yet; retrying", "member", member, "err", err)
			warned = time.Now()
		}
		select {
		case <-ctx.Done():
			return joinReply{}, fmt.Errorf("node: joining the cluster through %s: %w", member, err)
		case <-time.After(time.Second):
		}
	}
}

// askAgain reports whether a member's refusal of a join request asks
// the joining node to ask again later. The transport carries a refusal
// as text, so it is told by the text.
func askAgain(refusal error) bool {
	text := refusal.Error()
	return strings.Contains(text, errNotServingYet.Error()) || strings.Contains(text, errJoinNotRecorded.Error())
}

// answerJoin answers a join request on a member.
func answerJoin(b *broker.Broker, req joinRequest) ([]byte, error) {
	nodes, end, err := b.AddNode(req.NodeID, req.Addr)
	if errors.Is(err, broker.ErrStorage) {
		return nil, fmt.Errorf("%w: %v", errJoinNotRecorded, err)
	}
	if err != nil {
		return nil, err
	}
	return json.Marshal(joinReply{Nodes: nodes, MetadataEnd: end})
}

// clusterNodes is the cluster's nodes and their cluster addresses as
// this node starts, and, if it joins now, the end of the metadata log its
// member had applied. A node of the initial cluster takes its address
// book if it has one: the nodes in it, at the --initial-cluster address
// of those it names (the operator's word wins), while a node named there
// but not in the book was removed, and is neither dialled nor asked. A
// node started with --join takes its address book if it is in it at addr
// (it joined before), and asks to join otherwise.
func clusterNodes(ctx context.Context, cfg Config, addr net.Addr, logger *slog.Logger) (map[int32]string, int64, error) {
	cc := cfg.Cluster
	book, err := broker.ReadAddressBook(cfg.DataDir)
	switch {
	case err != nil:
		return nil, 0, fmt.Errorf("node: %w", err)
	case cc.Join == "" && book == nil:
		return cc.Nodes, 0, nil
	case cc.Join == "":
		nodes := maps.Clone(book)
		for id := range book {
			if a, ok := cc.Nodes[id]; ok {
				nodes[id] = a
			}
		}
		return nodes, 0, nil
	case book[cfg.NodeID] == addr.String():
		return book, 0, nil
	}
	reply, err := join(ctx, cc.Join, cfg.NodeID, addr, logger)
	return reply.Nodes, reply.MetadataEnd, err
}
