package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"time"
)

// The AMQP cluster section (issue 14): a quorum queue of three members on
// three `wharf serve` processes beside a 3-node RabbitMQ cluster's quorum
// queue, and beside the suite's single Wharf process, in the same run.
// Publisher and consumer are both on the node leading the queue, as the
// management API's /api/queues/{vhost}/{name} names it ("leader"), on
// Wharf and on RabbitMQ alike. Opt-in: -only amqpcluster.

// quorumClusterFlow is issue 14's workload: 1 KiB persistent messages
// published with confirms (at most confirmWindow unconfirmed) to a quorum
// queue of clusterNodes members and consumed with manual acks, prefetch
// 256.
var quorumClusterFlow = amqpFlow{bodySize: 1024, persistent: true, confirms: true, durable: true,
	queueType: "quorum", quorumMembers: clusterNodes, queues: 1, consume: true, prefetch: 256}

// quorumClusterTarget is issue 14's target: Wharf's 3-node quorum queue
// at least twice RabbitMQ's.
const quorumClusterTarget = 2

// quorumClusterWorkload is the workload column of the section's rows:
// what flows, where the clients are, and against what.
func quorumClusterWorkload(f amqpFlow, versus string) string {
	return fmt.Sprintf("AMQP cluster: quorum queue of %d members, %s persistent, confirms (≤%d unconfirmed), manual acks, prefetch %d; "+
		"publisher and consumer on the queue's leader's node; %s",
		f.quorumMembers, sizeName(f.bodySize), confirmWindow, f.prefetchCount(), versus)
}

func (s *suite) amqpClusterSection(ctx context.Context) error {
	s.logf("== amqpcluster: starting %d Wharf nodes", clusterNodes)
	c, err := s.startWharfClusterWith(ctx, "amqpcluster", true)
	if err != nil {
		return fmt.Errorf("start a %d-node cluster: %w", clusterNodes, err)
	}
	defer c.stop()
	urls := map[string]string{} // by node name, as the API names nodes
	for _, nd := range c.nodes {
		urls[fmt.Sprintf("wharf@%d", nd.id)] = "amqp://guest:guest@" + nd.amqpAddr + "/"
	}
	flow := quorumClusterFlow
	first := c.nodes[0]
	wharf3 := contender{name: fmt.Sprintf("Wharf, %d processes", clusterNodes), run: func(ctx context.Context) (figures, error) {
		return s.runAMQPFlowServedBy(ctx, urls["wharf@1"], flow, func(queue string) (string, error) {
			return s.leaderURL(ctx, first.httpAddr, queue, flow.quorumMembers, urls)
		})
	}}

	rabbit, skip, err := s.rabbitClusterPeer(ctx)
	if err != nil {
		return err
	}
	vsRabbit := comparison{
		workload: quorumClusterWorkload(flow, fmt.Sprintf("Wharf vs RabbitMQ, %d nodes each", clusterNodes)),
		metrics: []metric{
			{key: "rate", label: "throughput", unit: msgsPerSec, target: quorumClusterTarget},
			{key: "p50", label: "p50 publish-to-deliver", unit: msLatency},
			{key: "p99", label: "p99 publish-to-deliver", unit: msLatency},
		},
		wharf: wharf3,
		skip:  skip,
		notes: quorumClusterNotes("peer: RabbitMQ declares the queue on node 1 and places its leader there (client-local)"),
	}
	if rabbit != nil {
		defer rabbit.stop()
		rabbitURLs := map[string]string{}
		for _, r := range rabbit.nodes {
			rabbitURLs[r.nodeName] = r.amqpURL()
		}
		first := rabbit.nodes[0]
		vsRabbit.peer = &contender{name: fmt.Sprintf("RabbitMQ, %d-node cluster", clusterNodes), run: func(ctx context.Context) (figures, error) {
			return s.runAMQPFlowServedBy(ctx, first.amqpURL(), flow, func(queue string) (string, error) {
				return s.leaderURL(ctx, first.httpAddr, queue, flow.quorumMembers, rabbitURLs)
			})
		}}
	}
	if err := s.compare(ctx, vsRabbit); err != nil {
		return err
	}

	oneNode := flow
	oneNode.quorumMembers = 0 // one process: no Raft group to size
	return s.compare(ctx, comparison{
		workload: quorumClusterWorkload(flow, fmt.Sprintf("Wharf on %d processes vs Wharf on one", clusterNodes)),
		metrics:  flowMetrics,
		wharf:    wharf3,
		peer: &contender{name: "Wharf, one process", run: func(ctx context.Context) (figures, error) {
			return s.runAMQPFlow(ctx, s.wharf.amqpURL(), oneNode)
		}},
		notes: quorumClusterNotes("peer: one process's quorum queue is a durable queue confirmed after its own fdatasync, with no Raft"),
	})
}

// quorumClusterNotes notes, on the throughput row, how the clients find
// the leader and what the peer is, and on the p99 row the backlogs.
func quorumClusterNotes(peer string) func(metric, figures, figures) string {
	return func(m metric, w, p figures) string {
		switch m.key {
		case "rate":
			return joinNotes("clients on the node /api/queues/%2F/{queue} names as the leader, on both (Wharf places the leader on its least-loaded node)",
				peer, "both clusters run through the whole section, on one machine")
		case "p99":
			return fmt.Sprintf("backlog at window end: %s (Wharf), %s (peer) msgs",
				formatCount(figureOr(w, "backlog")), formatCount(figureOr(p, "backlog")))
		}
		return ""
	}
}

// apiQueue is what a management API (Wharf's or RabbitMQ's) shows of a
// quorum queue's membership.
type apiQueue struct {
	Leader  *string  `json:"leader"`
	Members []string `json:"members"`
}

// leaderURL waits (up to a minute) until the management API at httpAddr
// shows queue, in vhost "/", with a leader and members members, and
// returns the AMQP URL of the leader's node (urls, by node name); the
// clients connect there.
func (s *suite) leaderURL(ctx context.Context, httpAddr, queue string, members int, urls map[string]string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var last apiQueue
	var lastErr error
	for {
		last, lastErr = getAPIQueue(ctx, httpAddr, queue)
		if lastErr == nil && last.Leader != nil && len(last.Members) == members {
			url, ok := urls[*last.Leader]
			if !ok {
				return "", fmt.Errorf("queue %s is led by %s, not a node of this cluster", queue, *last.Leader)
			}
			s.logf("   %s led by %s, members %v: clients connect to it", queue, *last.Leader, last.Members)
			return url, nil
		}
		if err := sleepUntil(ctx, time.Now().Add(50*time.Millisecond)); err != nil {
			return "", fmt.Errorf("the API at %s never showed %s with a leader and %d members (last: %+v, %v): %w",
				httpAddr, queue, members, last, lastErr, err)
		}
	}
}

// getAPIQueue reads /api/queues/%2F/{queue} at httpAddr as guest.
func getAPIQueue(ctx context.Context, httpAddr, queue string) (apiQueue, error) {
	var q apiQueue
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+httpAddr+"/api/queues/%2F/"+url.PathEscape(queue), nil)
	if err != nil {
		return q, err
	}
	req.SetBasicAuth("guest", "guest")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return q, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return q, fmt.Errorf("GET /api/queues/%%2F/%s: %s", queue, resp.Status)
	}
	return q, json.NewDecoder(resp.Body).Decode(&q)
}

// rabbitClusterPeer starts a RabbitMQ cluster, or says why there is none.
// Only a canceled context is an error.
func (s *suite) rabbitClusterPeer(ctx context.Context) (*rabbitCluster, string, error) {
	if !rabbitAvailable() {
		skip := "rabbitmq-server not installed (" + rabbitServerScript + " missing)"
		s.skipped = append(s.skipped, "RabbitMQ cluster: "+skip)
		return nil, skip, nil
	}
	s.logf("== amqpcluster: starting a %d-node RabbitMQ cluster", clusterNodes)
	r, err := s.startRabbitCluster(ctx, filepath.Join(s.work, s.uniqueName("rabbitmq-cluster")))
	if err != nil {
		if ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
		skip := fmt.Sprintf("a %d-node RabbitMQ cluster could not be formed here: %v", clusterNodes, err)
		s.skipped = append(s.skipped, "RabbitMQ cluster: "+skip)
		return nil, skip, nil
	}
	s.addVersion(rabbitVersionLine(r.nodes[0].version) + fmt.Sprintf("; also as a %d-node cluster (section amqpcluster)", clusterNodes))
	return r, "", nil
}
