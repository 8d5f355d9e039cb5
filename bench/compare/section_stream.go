package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// jetStreamDefaultUnacked is nats.go's own limit of async publishes
// awaiting acks (PublishAsyncMaxPending's default).
const jetStreamDefaultUnacked = 4000

// streamSection compares persistent streaming with NATS JetStream (file
// storage), run as two servers: one with sync_interval: always, which
// acknowledges after an fsync as Wharf does, and one with default settings,
// which acknowledges before any fsync.
func (s *suite) streamSection(ctx context.Context) error {
	peers, skip, err := s.natsPeers(ctx)
	if err != nil {
		return err
	}
	defer func() {
		for _, n := range peers {
			s.procs.forget(n.child)
			if err := n.terminate(time.Minute); err != nil {
				s.logf("stopping nats-server: %v", err)
			}
		}
	}()
	peer := func(mode natsSync, unacked int) *contender {
		n := peers[mode]
		if n == nil {
			return nil
		}
		return &contender{name: mode.name, pid: n.processID, run: func(ctx context.Context) (figures, error) {
			return s.runJetStream(ctx, n.url(), 1024, unacked)
		}}
	}
	amqpStream := contender{name: "Wharf", pid: s.wharf.processID, run: func(ctx context.Context) (figures, error) {
		return s.runAMQPFlow(ctx, s.wharf.amqpURL(), amqpFlow{bodySize: 1024, persistent: true, confirms: true,
			durable: true, queueType: "stream", queues: 1})
	}}
	note := func(text string) func(metric, figures, figures) string {
		return func(metric, figures, figures) string { return text }
	}

	perMessage := fmt.Sprintf("Persistent stream publish, 1 KiB, ≤%d unacknowledged (Wharf: AMQP stream queue, confirms; JetStream: PublishAsync)", confirmWindow)
	comparisons := []comparison{{
		workload: perMessage,
		metrics:  []metric{{key: "rate", label: "throughput", unit: msgsPerSec, target: 1}},
		wharf:    amqpStream,
		peer:     peer(natsSyncAlways, confirmWindow),
		skip:     skip,
		notes: note("like-for-like durable: both acknowledge a message only once an fsync covers it " +
			"(JetStream with sync_interval: always fsyncs its message block after each write; Wharf group-commits fdatasyncs)"),
	}, {
		workload: perMessage,
		metrics:  []metric{{key: "rate", label: "throughput", unit: msgsPerSec}},
		wharf:    amqpStream,
		peer:     peer(natsSyncDefault, confirmWindow),
		skip:     skip,
		notes: note("acks before fsync: JetStream by default acknowledges once the message is written to its message block " +
			"and fsyncs every 2 minutes (sync_interval); Wharf confirms after fdatasync, so this peer does less per message"),
	}, {
		workload: fmt.Sprintf("Batched stream publish, 1 KiB (Wharf: Kafka acks=all, franz-go defaults; JetStream: PublishAsync, ≤%s unacknowledged, nats.go's default)",
			formatNumber(jetStreamDefaultUnacked)),
		metrics: []metric{{key: "rate", label: "throughput", unit: msgsPerSec}},
		wharf: contender{name: "Wharf", pid: s.wharf.processID, run: func(ctx context.Context) (figures, error) {
			return s.runKafkaProduce(ctx, s.wharf.kafkaAddr, produceAllKiB)
		}},
		peer: peer(natsSyncDefault, jetStreamDefaultUnacked),
		skip: skip,
		notes: note("not like-for-like: franz-go batches about 1,000 records per produce request (≤1 MB), ≤5 requests in flight, " +
			"and each acks=all reply waits for an fdatasync; nats.go has no batched publish and JetStream acknowledges each message on its own, " +
			"before any fsync: each side in its fastest ordinary use"),
	}}
	for _, c := range comparisons {
		if err := s.compare(ctx, c); err != nil {
			return err
		}
	}
	return nil
}

// natsPeers builds nats-server and starts one server per sync mode, or
// says why there are none. Only a canceled context is an error: a peer
// that cannot be built or started is a skipped peer.
func (s *suite) natsPeers(ctx context.Context) (map[natsSync]*natsServer, string, error) {
	skipAll := func(why string) (map[natsSync]*natsServer, string, error) {
		if ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
		s.skipped = append(s.skipped, "NATS JetStream: "+why)
		return nil, why, nil
	}
	s.logf("== building nats-server %s (cached after the first time)", natsServerVersion)
	bin, err := buildNATSServer(ctx)
	if err != nil {
		return skipAll("nats-server " + natsServerVersion + " could not be built: " + err.Error())
	}
	peers := map[natsSync]*natsServer{}
	var version string
	for _, mode := range []natsSync{natsSyncAlways, natsSyncDefault} {
		s.logf("== starting %s", mode.name)
		n, err := s.startNATS(ctx, bin, filepath.Join(s.work, mode.dir), mode)
		if err != nil {
			for _, started := range peers {
				s.procs.forget(started.child)
				started.terminate(time.Minute)
			}
			return skipAll("nats-server did not start: " + err.Error())
		}
		peers[mode] = n
		version = n.version
	}
	s.addVersion(fmt.Sprintf("NATS nats-server %s (built with `go install %s@%s`), JetStream file storage, two servers: "+
		"`sync_interval: always` (fsync after every write, before the ack) and default settings (fsync every 2 minutes); client nats.go %s",
		version, natsServerModule, natsServerVersion, moduleVersion("github.com/nats-io/nats.go")))
	return peers, "", nil
}
