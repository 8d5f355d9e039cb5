package main

import (
	"context"
	"path/filepath"
	"strings"
	"time"
)

// streamSection compares persistent streaming with NATS JetStream (file
// storage): 1 KiB publishes with acks, at most 256 unacknowledged.
func (s *suite) streamSection(ctx context.Context) error {
	var nats *natsServer
	skip := ""
	if bin := natsAvailable(); bin == "" {
		skip = "nats-server not installed"
		s.skipped = append(s.skipped, "NATS JetStream: "+skip)
	} else {
		s.logf("== starting nats-server")
		n, err := s.startNATS(ctx, bin, filepath.Join(s.work, "nats"))
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			skip = "nats-server did not start: " + err.Error()
			s.skipped = append(s.skipped, "NATS JetStream: "+skip)
		} else {
			nats = n
			defer func() {
				s.procs.forget(n.child)
				if err := n.terminate(time.Minute); err != nil {
					s.logf("stopping nats-server: %v", err)
				}
			}()
			s.addVersion("NATS " + strings.TrimPrefix(n.version, "nats-server: ") + " (Debian package " + debianVersion("nats-server") +
				"), JetStream file storage, default settings; client nats.go " + moduleVersion("github.com/nats-io/nats.go"))
		}
	}

	const workload = "Persistent stream publish, 1 KiB, acks, ≤256 unacknowledged"
	natsNote := "JetStream acks once the message is written to its file store (not fsynced: nats-server 2.9 syncs every 2 min and has no sync-always setting); Wharf acks after fdatasync"
	c := comparison{
		workload: workload,
		metrics:  []metric{{key: "rate", label: "Wharf AMQP stream queue (confirms)", unit: msgsPerSec}},
		wharf: contender{name: "Wharf", pid: s.wharf.processID, run: func(ctx context.Context) (figures, error) {
			return s.runAMQPFlow(ctx, s.wharf.amqpURL(), amqpFlow{bodySize: 1024, persistent: true, confirms: true,
				durable: true, queueType: "stream", queues: 1})
		}},
		skip:  skip,
		notes: func(metric, figures, figures) string { return natsNote },
	}
	if nats != nil {
		c.peer = &contender{name: "NATS JetStream (file)", pid: nats.processID, run: func(ctx context.Context) (figures, error) {
			return s.runJetStream(ctx, nats.url(), 1024)
		}}
	}
	if err := s.compare(ctx, c); err != nil {
		return err
	}

	// The same peer figure beside Wharf's Kafka acks=all produce row (one
	// franz-go producer, its own in-flight limit rather than a 256 window),
	// which was measured in the Kafka section of this run.
	if k, ok := s.medians[produceAllKiB.String()+"|Wharf"]; ok {
		r := row{
			Workload:  workload + ": Wharf Kafka acks=all (figure from the Kafka row)",
			Unit:      msgsPerSec,
			Wharf:     figureOr(k, "rate"),
			PeerValue: figureOr(s.medians[workload+"|NATS JetStream (file)"], "rate"),
			Notes:     joinNotes("franz-go defaults: batches of up to 1 MB, ≤5 requests in flight", natsNote),
		}
		if nats != nil {
			r.Peer = "NATS JetStream (file)"
		} else {
			r.Notes = joinNotes("peer skipped: "+skip, r.Notes)
		}
		s.rows = append(s.rows, r)
	}
	return nil
}
