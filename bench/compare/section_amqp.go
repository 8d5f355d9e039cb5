package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// amqpWorkload is one AMQP flow of the table.
type amqpWorkload struct {
	name string
	flow amqpFlow
	full bool // only with -full
	// peer names RabbitMQ's side when its queue is not a classic one.
	peer string
	// note, when set, heads the notes of the workload's throughput row.
	note string
}

// amqpWorkloads are the AMQP issues' benchmark flows: one publisher, one
// consumer (manual acks, prefetch 200), and the fanout of issue 6.
var amqpWorkloads = []amqpWorkload{
	{name: "AMQP 1 KiB persistent, confirms, durable classic queue",
		flow: amqpFlow{bodySize: 1024, persistent: true, confirms: true, durable: true, queues: 1, consume: true}},
	{name: "AMQP 1 KiB persistent, confirms, quorum queue, one node on both sides",
		flow: amqpFlow{bodySize: 1024, persistent: true, confirms: true, durable: true, queueType: "quorum", queues: 1, consume: true},
		peer: "RabbitMQ (quorum queue: a one-member Raft log)",
		note: "neither side is replicated: RabbitMQ's quorum queue on one node is a Raft log with one member, which fsyncs before confirming; " +
			"Wharf's quorum queue on one node is a durable queue with quorum-queue semantics (always durable, x-delivery-limit, x-delivery-count), confirmed after fdatasync, with no Raft"},
	{name: "AMQP 1 KiB transient, no confirms, non-durable classic queue",
		flow: amqpFlow{bodySize: 1024, queues: 1, consume: true}},
	{name: "AMQP 16 B persistent, confirms, durable classic queue",
		flow: amqpFlow{bodySize: 16, persistent: true, confirms: true, durable: true, queues: 1, consume: true}},
	{name: "AMQP 16 B transient, no confirms, non-durable classic queue", full: true,
		flow: amqpFlow{bodySize: 16, queues: 1, consume: true}},
	{name: "AMQP fanout to 10 durable queues, 1 KiB persistent, confirms",
		flow: amqpFlow{bodySize: 1024, persistent: true, confirms: true, durable: true, queues: 10, consume: true}},
	// The same fanout at a fixed load both brokers sustain, so latency is
	// compared without the queueing a flat-out run adds.
	{name: "AMQP fanout to 10 durable queues, 1 KiB persistent, confirms, 2,000 msg/s offered",
		flow: amqpFlow{bodySize: 1024, persistent: true, confirms: true, durable: true, queues: 10, consume: true, perSecond: 2000}},
}

// manyQueues is the queue count of issue 6's "1000 queues with one message
// each".
const manyQueues = 1000

var flowMetrics = []metric{
	{key: "rate", label: "throughput", unit: msgsPerSec},
	{key: "p50", label: "p50 publish-to-deliver", unit: msLatency},
	{key: "p99", label: "p99 publish-to-deliver", unit: msLatency},
}

// amqpSection runs every AMQP workload against Wharf and RabbitMQ.
func (s *suite) amqpSection(ctx context.Context) error {
	rabbit, skip, err := s.rabbitPeer(ctx)
	if err != nil {
		return err
	}
	if rabbit != nil {
		defer func() {
			s.procs.forget(rabbit.child)
			if err := rabbit.terminate(2 * time.Minute); err != nil {
				s.logf("stopping RabbitMQ: %v", err)
			}
		}()
	}
	for _, wl := range amqpWorkloads {
		if wl.full && !s.opts.full {
			continue
		}
		flow := wl.flow
		metrics := flowMetrics
		if flow.perSecond > 0 {
			metrics = flowMetrics[1:] // the rate is the offered one; it goes in the notes
		}
		c := comparison{
			workload: wl.name,
			metrics:  metrics,
			wharf: contender{name: "Wharf", pid: s.wharf.processID, run: func(ctx context.Context) (figures, error) {
				return s.runAMQPFlow(ctx, s.wharf.amqpURL(), flow)
			}},
			skip:  skip,
			notes: flowNotes(wl),
		}
		if rabbit != nil {
			peer := wl.peer
			if peer == "" {
				peer = "RabbitMQ (classic queue)"
			}
			c.peer = &contender{name: peer, pid: rabbit.vmPid, run: func(ctx context.Context) (figures, error) {
				return s.runAMQPFlow(ctx, rabbit.amqpURL(), flow)
			}}
		}
		if err := s.compare(ctx, c); err != nil {
			return err
		}
	}

	c := comparison{
		workload: fmt.Sprintf("AMQP %d durable queues, one 1 KiB persistent message each (declare, publish with confirms, basic.get + ack)", manyQueues),
		metrics:  []metric{{key: "total", label: "total time", unit: msTime}},
		wharf: contender{name: "Wharf", pid: s.wharf.processID, run: func(ctx context.Context) (figures, error) {
			return s.runManyQueues(ctx, s.wharf.amqpURL(), manyQueues)
		}},
		skip: skip,
		notes: func(_ metric, w, p figures) string {
			return "declare / publish / get ms: " + phases(w) + " (Wharf), " + phases(p) + " (peer)"
		},
	}
	if rabbit != nil {
		c.peer = &contender{name: "RabbitMQ (classic queues)", pid: rabbit.vmPid, run: func(ctx context.Context) (figures, error) {
			return s.runManyQueues(ctx, rabbit.amqpURL(), manyQueues)
		}}
	}
	return s.compare(ctx, c)
}

// rabbitPeer starts RabbitMQ, or says why there is none. Only a canceled
// context is an error: a broken RabbitMQ is a skipped peer.
func (s *suite) rabbitPeer(ctx context.Context) (*rabbitServer, string, error) {
	if !rabbitAvailable() {
		skip := "rabbitmq-server not installed (" + rabbitServerScript + " missing)"
		s.skipped = append(s.skipped, "RabbitMQ: "+skip)
		return nil, skip, nil
	}
	s.logf("== starting RabbitMQ")
	r, err := s.startRabbitMQ(ctx, filepath.Join(s.work, "rabbitmq"))
	if err != nil {
		if ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
		skip := "RabbitMQ did not start: " + err.Error()
		s.skipped = append(s.skipped, "RabbitMQ: "+skip)
		return nil, skip, nil
	}
	s.addVersion(rabbitVersionLine(r.version))
	return r, "", nil
}

// rabbitVersionLine describes the RabbitMQ peer for the machine section.
func rabbitVersionLine(version string) string {
	return fmt.Sprintf("RabbitMQ %s (Debian package %s, Erlang/OTP from erlang-base %s), default configuration, plugins off",
		version, debianVersion("rabbitmq-server"), debianVersion("erlang-base"))
}

// addVersion records a peer's version once.
func (s *suite) addVersion(v string) {
	for _, x := range s.versions {
		if x == v {
			return
		}
	}
	s.versions = append(s.versions, v)
}

// flowNotes explains a flow row: the workload's own note, the publisher
// backlog left when the window closed (a backlog means the consumer could
// not keep up, so latency is queueing time), and for fanout, deliveries per
// message.
func flowNotes(wl amqpWorkload) func(metric, figures, figures) string {
	f := wl.flow
	return func(m metric, w, p figures) string {
		var notes []string
		if m.key == "rate" {
			notes = append(notes, wl.note)
		}
		if m.key == "rate" && f.queues > 1 {
			notes = append(notes, fmt.Sprintf("messages published/s; each is delivered %d times", f.queues))
		}
		if m.key == "p50" && f.perSecond > 0 {
			notes = append(notes, fmt.Sprintf("paced: %s msg/s offered, latency from each message's due time; delivered %s (Wharf), %s (peer) msg/s",
				formatNumber(float64(f.perSecond)), formatNumber(figureOr(w, "rate")), formatNumber(figureOr(p, "rate"))))
		}
		if m.key == "rate" && !f.confirms {
			notes = append(notes, "publisher unthrottled by confirms")
		}
		if m.key == "p99" {
			notes = append(notes, fmt.Sprintf("backlog at window end: %s (Wharf), %s (peer) msgs",
				formatCount(figureOr(w, "backlog")), formatCount(figureOr(p, "backlog"))))
		}
		return joinNotes(notes...)
	}
}

// phases prints the many-queues phase times.
func phases(f figures) string {
	return fmt.Sprintf("%s / %s / %s", formatNumber(figureOr(f, "declare")),
		formatNumber(figureOr(f, "publish")), formatNumber(figureOr(f, "get")))
}
