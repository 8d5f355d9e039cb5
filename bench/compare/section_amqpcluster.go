package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// The AMQP cluster section (issue 14): a quorum queue of three members on
// three `wharf serve` processes beside a 3-node RabbitMQ cluster's quorum
// queue, and beside the suite's single Wharf process, in the same run.
// Publisher and consumer are both on the node leading the queue. Opt-in:
// -only amqpcluster.

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
		"publisher and consumer on one node (RabbitMQ: the leader's; Wharf: see the notes); %s",
		f.quorumMembers, sizeName(f.bodySize), confirmWindow, f.prefetchCount(), versus)
}

func (s *suite) amqpClusterSection(ctx context.Context) error {
	s.logf("== amqpcluster: starting %d Wharf nodes", clusterNodes)
	c, err := s.startWharfClusterWith(ctx, "amqpcluster", true)
	if err != nil {
		return fmt.Errorf("start a %d-node cluster: %w", clusterNodes, err)
	}
	defer c.stop()
	var urls []string
	for _, nd := range c.nodes {
		urls = append(urls, "amqp://guest:guest@"+nd.amqpAddr+"/")
	}
	flow := quorumClusterFlow
	wharf3 := contender{name: fmt.Sprintf("Wharf, %d processes", clusterNodes), run: func(ctx context.Context) (figures, error) {
		return s.runAMQPFlowServedBy(ctx, urls[0], flow, func(queue string) (string, error) {
			return quorumLeaderURL(ctx, urls, queue)
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
		notes: quorumClusterNotes(fmt.Sprintf("peer: RabbitMQ's leader is node 1, where the queue was declared (client-local placement), with %d members: both checked each run", flow.quorumMembers)),
	}
	if rabbit != nil {
		defer rabbit.stop()
		first := rabbit.nodes[0]
		vsRabbit.peer = &contender{name: fmt.Sprintf("RabbitMQ, %d-node cluster", clusterNodes), run: func(ctx context.Context) (figures, error) {
			return s.runAMQPFlowServedBy(ctx, first.amqpURL(), flow, func(queue string) (string, error) {
				q, err := rabbit.quorumQueueInfo(ctx, queue)
				if err != nil {
					return "", err
				}
				if q.Leader != first.nodeName || len(q.Members) != flow.quorumMembers {
					return "", fmt.Errorf("queue %s is led by %s with members %v, not by %s (where it was declared) with %d",
						queue, q.Leader, q.Members, first.nodeName, flow.quorumMembers)
				}
				return first.amqpURL(), nil
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
			return joinNotes(fmt.Sprintf("Wharf's clients are on the first of its %d nodes whose basic.get on the queue succeeds: since any node serves a quorum queue, not necessarily the leader's (a follow-up: find the leader)", clusterNodes),
				peer, "both clusters run through the whole section, on one machine")
		case "p99":
			return fmt.Sprintf("backlog at window end: %s (Wharf), %s (peer) msgs",
				formatCount(figureOr(w, "backlog")), formatCount(figureOr(p, "backlog")))
		}
		return ""
	}
}

// quorumLeaderURL waits (up to a minute) until one of urls serves
// basic.get on queue, and returns it. Written when only the node leading a
// quorum queue served it; now every node does (through the leader), so
// the node it returns need not lead the queue.
func quorumLeaderURL(ctx context.Context, urls []string, queue string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var lastErr error
	for {
		for _, url := range urls {
			if lastErr = servesGet(url, queue); lastErr == nil {
				return url, nil
			}
		}
		if err := sleepUntil(ctx, time.Now().Add(50*time.Millisecond)); err != nil {
			return "", fmt.Errorf("no node serves %s (last: %v): %w", queue, lastErr, err)
		}
	}
}

// servesGet reports (nil) whether the broker at url answers basic.get on
// queue, which is empty.
func servesGet(url, queue string) error {
	conn, err := amqp.Dial(url)
	if err != nil {
		return err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	_, _, err = ch.Get(queue, false)
	return err
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
