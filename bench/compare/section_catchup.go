package main

import (
	"context"
	"fmt"
)

// limitColdRead is the key of the cold sequential-read limit in
// suite.medians.
const limitColdRead = "limit|disk cold read"

// catchupSection measures a consumer catching up from disk: -catchup-gib
// of 1 KiB records written to one partition (then to 16), the
// page cache dropped, then everything read from offset 0; beside kfake and
// beside the disk's own sequential read of a file of the same size after
// the same cache drop. One run each, fresh servers.
func (s *suite) catchupSection(ctx context.Context) error {
	gib := s.opts.catchupGiB
	total := int64(gib * (1 << 30))
	limitWhat := fmt.Sprintf("sequential 1 MiB reads of a %g GiB file after dropping the page cache", gib)
	s.logf("== limit: %s", limitWhat)
	lim, how, err := s.runColdRead(ctx, total)
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		s.logf("   failed: %v", err)
		s.limits = append(s.limits, fmt.Sprintf("%s: failed: %v", limitWhat, err))
	default:
		s.logf("   %v (%s)", lim, how)
		s.medians[limitColdRead] = lim
		s.limits = append(s.limits, fmt.Sprintf("%s: %s MB/s (%s)", limitWhat, formatNumber(lim["mbps"]), how))
	}

	for _, parts := range []int32{1, 16} {
		if err := s.catchupRows(ctx, gib, total, parts); err != nil {
			return err
		}
	}
	return nil
}

// catchupRows runs the catch-up read with partitions partitions on a fresh
// Wharf and a fresh kfake and adds its rows.
func (s *suite) catchupRows(ctx context.Context, gib float64, total int64, partitions int32) error {
	s.logf("== catch-up: %g GiB, %d partition(s)", gib, partitions)
	var w, p catchupResult
	_, err := s.withFreshWharf(ctx, "catchup", func(ws *wharfServer) (figures, error) {
		w = s.runCatchup(ctx, ws.kafkaAddr, ws.dataDir, ws.pid(), partitions, total)
		return w.f, w.err
	})
	if w.f == nil && w.err == nil {
		w.err = err // Wharf did not start
	}
	s.logf("   Wharf %v %v (%s)", w.f, w.err, w.evicted)
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err = s.withFreshKfake(ctx, "catchup-kfake", func(k *kfakeServer) (figures, error) {
		p = s.runCatchup(ctx, k.addr, k.dir, k.pid(), partitions, total)
		return p.f, p.err
	})
	if p.f == nil && p.err == nil {
		p.err = err // kfake did not start
	}
	s.logf("   kfake %v %v", p.f, p.err)
	if err := ctx.Err(); err != nil {
		return err
	}

	workload := fmt.Sprintf("Kafka catch-up read from offset 0 after dropping the page cache, %g GiB of 1 KiB records, %d partition%s, one franz-go consumer",
		gib, partitions, plural(partitions))
	s.addScaleRows(workload,
		[]metric{
			{key: "rate", label: "records consumed", unit: msgsPerSec},
			{key: "mbps", label: "record bytes", unit: mbPerSec},
		},
		scaleResult{f: w.f, err: w.err}, scaleResult{f: p.f, err: p.err}, kfakeCached.name, "",
		func(m metric, wf, pf figures) string {
			switch m.key {
			case "rate":
				return joinNotes("one run", "before each read: "+w.evicted,
					"kfake keeps a per-batch index in memory and reads each batch from its segment file (a seek and a read per batch, in its one request goroutine)")
			case "mbps":
				return fmt.Sprintf("written first with acks=1 at %s MB/s (Wharf), %s MB/s (peer); server memory after writing: %s MiB (Wharf), %s MiB (peer)",
					formatNumber(figureOr(wf, "fillmbps")), formatNumber(figureOr(pf, "fillmbps")),
					formatNumber(figureOr(wf, "rss")), formatNumber(figureOr(pf, "rss")))
			}
			return ""
		})

	if l, ok := s.medians[limitColdRead]; ok && w.err == nil {
		s.rows = append(s.rows, row{
			Workload: workload + ": record bytes", Unit: mbPerSec,
			Wharf: figureOr(w.f, "mbps"), Peer: "limit: disk sequential read, page cache dropped", PeerValue: figureOr(l, "mbps"),
			Notes: "the limit reads one file of the same size with 1 MiB reads, no protocol; Wharf's figure counts record values only",
			Limit: true,
		})
	}
	return nil
}
