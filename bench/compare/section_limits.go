package main

import (
	"context"
	"fmt"
	"math"
	"strings"
)

// Keys of the limit figures in suite.medians.
const (
	limitDiskPerBatch = "limit|disk 1 MiB, fdatasync each"
	limitDiskGroup    = "limit|disk 1 MiB, group commit"
	limitDisk4K       = "limit|disk 4 KiB"
	limitTCP          = "limit|loopback"
)

// diskLimitMethods are the ways of appending 1 MiB batches durably whose
// best figure is the disk limit of the acks=all rows, with the name each
// has in the table.
var diskLimitMethods = []struct{ key, name string }{
	{limitDiskPerBatch, "fdatasync per 1 MiB append"},
	{limitDiskGroup, "group-commit appends"},
}

// diskLimitTarget is the share of the disk limit a Kafka acks=all producer
// on one partition is meant to reach.
const diskLimitTarget = 0.95

// limitsSection measures the disk and loopback limits (median of -runs).
func (s *suite) limitsSection(ctx context.Context) error {
	mbps := func(f figures) string { return fmt.Sprintf("%s MB/s", formatNumber(f["mbps"])) }
	steps := []struct {
		key, what string
		run       func(context.Context) (figures, error)
		describe  func(figures) string
	}{
		{limitDiskPerBatch, "fdatasync per 1 MiB append: 1 MiB appends to 1 GiB segment files, an fdatasync after each before the next",
			func(ctx context.Context) (figures, error) { return s.runDiskSync(ctx, 1<<20) }, mbps},
		{limitDiskGroup, fmt.Sprintf("group-commit appends: 1 MiB appends to 1 GiB segment files, up to %d of them written but not yet synced while rounds of fdatasync run, each covering all written when it started", groupCommitInFlight),
			func(ctx context.Context) (figures, error) { return s.runDiskGroupCommit(ctx, 1<<20) },
			func(f figures) string {
				return fmt.Sprintf("%s MB/s (%s rounds/s)", formatNumber(f["mbps"]), formatNumber(f["ops"]))
			}},
		{limitDisk4K, "4 KiB appends, fdatasync after each",
			func(ctx context.Context) (figures, error) { return s.runDiskSync(ctx, 4<<10) },
			func(f figures) string {
				return fmt.Sprintf("%s fdatasyncs/s (%s ms each)", formatNumber(f["ops"]), formatNumber(1000/f["ops"]))
			}},
		{limitTCP, "TCP copy over 127.0.0.1, 1 MiB writes", s.runLoopbackTCP, mbps},
	}
	for _, st := range steps {
		s.logf("== limit: %s", st.what)
		var runs []figures
		for i := 0; i < s.opts.runs; i++ {
			f, err := st.run(ctx)
			if err != nil {
				return err
			}
			s.logf("   run %d %v", i+1, f)
			runs = append(runs, f)
		}
		m := medianFigures(runs)
		s.medians[st.key] = m
		s.limits = append(s.limits, fmt.Sprintf("%s: %s", st.what, st.describe(m)))
	}
	if name, best := s.diskLimit(); !math.IsNaN(best) {
		s.limits = append(s.limits, fmt.Sprintf("disk limit of the acks=all rows, the better of the two methods above: %s MB/s (%s)", formatNumber(best), name))
	}
	return nil
}

// diskLimit is the best of the disk-limit methods measured, in MB/s, and
// its name; NaN when none was.
func (s *suite) diskLimit() (string, float64) {
	name, best := "", math.NaN()
	for _, m := range diskLimitMethods {
		f, ok := s.medians[m.key]
		if v := figureOr(f, "mbps"); ok && !math.IsNaN(v) && (math.IsNaN(best) || v > best) {
			name, best = m.name, v
		}
	}
	return name, best
}

// limitRows compares Wharf's Kafka produce bytes with the disk and loopback
// limits, when both were measured.
func (s *suite) limitRows(acksAll, acks1 produceSpec) {
	add := func(spec produceSpec, limitName string, limit float64, target float64, note string) {
		w, ok := s.medians[spec.String()+"|Wharf"]
		if !ok || math.IsNaN(limit) {
			return
		}
		s.rows = append(s.rows, row{
			Workload: spec.String() + ": record bytes", Unit: mbPerSec,
			Wharf: figureOr(w, "mbps"), Peer: limitName, PeerValue: limit, Notes: note, Limit: true, Target: target,
		})
	}
	var methods []string
	for _, m := range diskLimitMethods {
		methods = append(methods, fmt.Sprintf("%s %s MB/s", m.name, formatNumber(figureOr(s.medians[m.key], "mbps"))))
	}
	best, limit := s.diskLimit()
	add(acksAll, "limit: disk, "+best, limit, diskLimitTarget, joinNotes(
		"every acks=all reply waits for an fdatasync covering it; the limit is the better of two ways of appending 1 MiB batches to 1 GiB segment files durably, no protocol: "+
			strings.Join(methods, ", "),
		"Wharf's figure counts record values only (its log also holds about 1% of record and batch headers)"))
	add(acks1, "limit: loopback TCP copy", figureOr(s.medians[limitTCP], "mbps"), 0,
		"acks=1 replies once the batch is in the page cache; the records cross loopback once")
}
