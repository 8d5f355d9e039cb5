package main

import (
	"context"
	"fmt"
	"time"
)

// jetstreamSection compares Wharf's JetStream with nats-server's, the same
// nats.go publisher on both sides: acknowledged publishes per second, with
// one publisher and with four on one stream. Wharf acknowledges a publish
// after an fdatasync that covers it (group-committed across publishers);
// the like-for-like peer is nats-server with sync_interval: always (an
// fsync after every write, before the ack). nats-server's default
// acknowledges before any fsync (it syncs every 2 minutes), so that row is
// not durability-equivalent.
func (s *suite) jetstreamSection(ctx context.Context) error {
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
	wharfURL := "nats://" + s.wharf.natsAddr
	note := func(text string) func(metric, figures, figures) string {
		return func(metric, figures, figures) string { return text }
	}
	var comparisons []comparison
	for _, publishers := range []int{1, 4} {
		run := func(url string) func(ctx context.Context) (figures, error) {
			return func(ctx context.Context) (figures, error) {
				return s.runJetStreamPublishers(ctx, url, 1024, confirmWindow, publishers)
			}
		}
		peer := func(mode natsSync) *contender {
			n := peers[mode]
			if n == nil {
				return nil
			}
			return &contender{name: mode.name, pid: n.processID, run: run(n.url())}
		}
		who := "1 publisher"
		if publishers > 1 {
			who = fmt.Sprintf("%d publishers", publishers)
		}
		workload := fmt.Sprintf("JetStream acknowledged publish, 1 KiB, %s to one stream, ≤%d unacknowledged each (PublishAsync on both sides)",
			who, confirmWindow)
		wharf := contender{name: "Wharf", pid: s.wharf.processID, run: run(wharfURL)}
		comparisons = append(comparisons, comparison{
			workload: workload,
			metrics:  []metric{{key: "rate", label: "throughput", unit: msgsPerSec, target: 1}},
			wharf:    wharf,
			peer:     peer(natsSyncAlways),
			skip:     skip,
			notes: note("like-for-like durable: both acknowledge a publish only once an fsync covers it " +
				"(nats-server with sync_interval: always fsyncs after each write; Wharf group-commits fdatasyncs across publishers)"),
		}, comparison{
			workload: workload,
			metrics:  []metric{{key: "rate", label: "throughput", unit: msgsPerSec}},
			wharf:    wharf,
			peer:     peer(natsSyncDefault),
			skip:     skip,
			notes: note("acks before fsync: nats-server by default acknowledges once the message is written and fsyncs every 2 minutes; " +
				"Wharf acknowledges after fdatasync, so this peer does less per message"),
		})
	}
	for _, c := range comparisons {
		if err := s.compare(ctx, c); err != nil {
			return err
		}
	}
	return nil
}
