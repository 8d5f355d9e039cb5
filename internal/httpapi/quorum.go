package httpapi

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/wharf-mq/wharf/internal/mq"
)

// Quorum queue membership (RabbitMQ's quorum queue replica endpoints):
// POST /api/queues/quorum/replicas/on/{node}/grow and DELETE
// /api/queues/quorum/replicas/on/{node}/shrink. Both wait, as
// RabbitMQ's do, until every change is applied, for at most
// membershipWait, and answer 200 with one object per queue ({vhost, name,
// members, target, error, pending}); pending (with its error) is a change
// recorded but not applied in that time, which the queue's leader carries
// on: /api/queues shows the members as they change. (RabbitMQ answers
// grow with 204; any client that takes a 2xx takes this.)

// membershipWait bounds how long a grow or shrink waits for its changes
// (RabbitMQ's endpoints wait 30 s): shorter than the 15 s the wharf CLI
// gives a management command, so that it gets the answer and waits for
// what is pending itself.
const membershipWait = 10 * time.Second

// nodeName names cluster node id as /api/nodes names nodes: this
// server's own name on a single node.
func (s *Server) nodeName(id int32) string {
	if id <= 0 || s.reg.NodeID() == 0 {
		return s.cfg.NodeName
	}
	return mq.NodeName(id)
}

func (s *Server) nodeNames(ids []int32) []string {
	names := make([]string, len(ids))
	for i, id := range ids {
		names[i] = s.nodeName(id)
	}
	return names
}

// putQuorumMembers adds a quorum queue's leader, members and online
// members to its JSON, as RabbitMQ shows them; its "node" is the
// leader's ("leader" and "node" null while no leader is known here).
func (s *Server) putQuorumMembers(obj map[string]any, q mq.QueueDetail) {
	if q.Members == nil {
		return
	}
	var leader any
	if q.Leader > 0 {
		leader = s.nodeName(q.Leader)
	}
	obj["leader"], obj["node"] = leader, leader
	obj["members"], obj["online"] = s.nodeNames(q.Members), s.nodeNames(q.Online)
}

// growBody is the body of the grow endpoint, as RabbitMQ's.
type growBody struct {
	Strategy     string `json:"strategy"` // all (default) or even
	QueuePattern string `json:"queue_pattern"`
	VHostPattern string `json:"vhost_pattern"`
}

// growQuorumQueues is POST /api/queues/quorum/replicas/on/{node}/grow.
func (s *Server) growQuorumQueues(w http.ResponseWriter, r *http.Request) {
	node, ok := s.clusterNode(w, r)
	if !ok {
		return
	}
	var body growBody
	if r.ContentLength != 0 && !decodeBody(w, r, &body, maxBodyBytes) {
		return
	}
	sel := mq.QuorumSelection{EvenOnly: body.Strategy == "even"}
	if body.Strategy != "" && body.Strategy != "all" && body.Strategy != "even" {
		writeBadRequest(w, "strategy must be all or even, not "+body.Strategy)
		return
	}
	var err error
	if sel.Queues, err = compilePattern(body.QueuePattern); err == nil {
		sel.VHosts, err = compilePattern(body.VHostPattern)
	}
	if err != nil {
		writeBadRequest(w, err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), membershipWait)
	defer cancel()
	changes, err := s.reg.GrowQuorumQueues(ctx, node, sel)
	s.writeMembershipChanges(w, changes, err)
}

// shrinkQuorumQueues is DELETE /api/queues/quorum/replicas/on/{node}/shrink.
func (s *Server) shrinkQuorumQueues(w http.ResponseWriter, r *http.Request) {
	node, ok := s.clusterNode(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), membershipWait)
	defer cancel()
	changes, err := s.reg.ShrinkQuorumQueues(ctx, node)
	s.writeMembershipChanges(w, changes, err)
}

// clusterNode is the node a request names, "wharf@N" or N, or a 400.
func (s *Server) clusterNode(w http.ResponseWriter, r *http.Request) (int32, bool) {
	name := r.PathValue("node")
	id, err := strconv.ParseInt(strings.TrimPrefix(name, "wharf@"), 10, 32)
	if err != nil || id <= 0 {
		writeBadRequest(w, "no node named "+name+": cluster nodes are named wharf@<node id>")
		return 0, false
	}
	return int32(id), true
}

func compilePattern(p string) (*regexp.Regexp, error) {
	if p == "" {
		return nil, nil
	}
	return regexp.Compile(p)
}

func (s *Server) writeMembershipChanges(w http.ResponseWriter, changes []mq.MembershipChange, err error) {
	switch {
	case errors.Is(err, mq.ErrNotClustered), errors.Is(err, mq.ErrUnknownNode):
		writeBadRequest(w, err.Error())
		return
	case err != nil:
		writeMQError(w, err)
		return
	}
	out := []map[string]any{}
	for _, c := range changes {
		var reason any
		if c.Err != nil {
			reason = c.Err.Error()
		}
		out = append(out, map[string]any{"vhost": c.VHost, "name": c.Queue, "members": s.nodeNames(c.Members),
			"target": s.nodeNames(c.Target), "error": reason, "pending": errors.Is(c.Err, mq.ErrChangePending)})
	}
	writeJSON(w, http.StatusOK, out)
}
