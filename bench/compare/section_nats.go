package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// corePubSubWorkloads are Core NATS issue 17's pub/sub rows.
var corePubSubWorkloads = []struct {
	name             string
	bodySize, fanOut int
	target           float64
}{
	{"Core NATS pub/sub, 16 B, one publisher, one subscriber", 16, 1, 0.8},
	{"Core NATS pub/sub, 1 KiB, one publisher, one subscriber", 1024, 1, 0.8},
	{"Core NATS fan-out to 10 subscribers, 16 B", 16, 10, 0},
}

// natsSection compares Core NATS (in-memory pub/sub, at most once) with
// a nats-server on its default settings, through nats.go on both sides.
func (s *suite) natsSection(ctx context.Context) error {
	peerServer, skip, err := s.coreNATSPeer(ctx)
	if err != nil {
		return err
	}
	if peerServer != nil {
		defer func() {
			s.procs.forget(peerServer.child)
			if err := peerServer.terminate(time.Minute); err != nil {
				s.logf("stopping nats-server: %v", err)
			}
		}()
	}
	wharfURL := "nats://" + s.wharf.natsAddr
	side := func(name string, pid func() (int, error), run func(ctx context.Context, url string) (figures, error), url string) contender {
		return contender{name: name, pid: pid, run: func(ctx context.Context) (figures, error) { return run(ctx, url) }}
	}
	peer := func(run func(ctx context.Context, url string) (figures, error)) *contender {
		if peerServer == nil {
			return nil
		}
		c := side("nats-server "+natsServerVersion+" (default settings)", peerServer.processID, run, peerServer.url())
		return &c
	}
	var comparisons []comparison
	for _, wl := range corePubSubWorkloads {
		run := func(ctx context.Context, url string) (figures, error) {
			return s.runCorePubSub(ctx, url, wl.bodySize, wl.fanOut)
		}
		label := "throughput"
		if wl.fanOut > 1 {
			label = "throughput per subscriber"
		}
		comparisons = append(comparisons, comparison{
			workload: wl.name,
			metrics:  []metric{{key: "rate", label: label, unit: msgsPerSec, target: wl.target}},
			wharf:    side("Wharf", s.wharf.processID, run, wharfURL),
			peer:     peer(run),
			skip:     skip,
		})
	}
	comparisons = append(comparisons, comparison{
		workload: "Core NATS request-reply, 16 B, one requester waiting for each reply",
		metrics: []metric{
			{key: "p50", label: "p50 round trip", unit: msLatency},
			{key: "p99", label: "p99 round trip", unit: msLatency},
			{key: "rate", label: "round trips", unit: msgsPerSec},
		},
		wharf: side("Wharf", s.wharf.processID, s.runCoreRequestReply, wharfURL),
		peer:  peer(s.runCoreRequestReply),
		skip:  skip,
	})
	for _, c := range comparisons {
		if err := s.compare(ctx, c); err != nil {
			return err
		}
	}
	return nil
}

// coreNATSPeer builds nats-server and starts it with default settings, or
// says why there is none. Only a canceled context is an error.
func (s *suite) coreNATSPeer(ctx context.Context) (*natsServer, string, error) {
	skip := func(why string) (*natsServer, string, error) {
		if ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
		s.skipped = append(s.skipped, "Core NATS: "+why)
		return nil, why, nil
	}
	s.logf("== building nats-server %s (cached after the first time)", natsServerVersion)
	bin, err := buildNATSServer(ctx)
	if err != nil {
		return skip("nats-server " + natsServerVersion + " could not be built: " + err.Error())
	}
	s.logf("== starting nats-server for Core NATS")
	n, err := s.startCoreNATS(ctx, bin, filepath.Join(s.work, "nats-core"))
	if err != nil {
		return skip("nats-server did not start: " + err.Error())
	}
	s.addVersion(fmt.Sprintf("NATS nats-server %s for Core NATS: default settings (max_payload 1 MiB, max_pending 64 MiB); client nats.go %s",
		n.version, moduleVersion("github.com/nats-io/nats.go")))
	return n, "", nil
}
