package main

import (
	"context"
	"fmt"
)

// Keys of the limit figures in suite.medians.
const (
	limitDiskMiB = "limit|disk 1 MiB"
	limitDisk4K  = "limit|disk 4 KiB"
	limitTCP     = "limit|loopback"
)

// limitsSection measures the disk and loopback limits (median of -runs).
func (s *suite) limitsSection(ctx context.Context) error {
	steps := []struct {
		key, what string
		run       func(context.Context) (figures, error)
		describe  func(figures) string
	}{
		{limitDiskMiB, "sequential 1 MiB writes, fdatasync after each", func(ctx context.Context) (figures, error) { return s.runDiskSync(ctx, 1<<20) },
			func(f figures) string { return fmt.Sprintf("%s MB/s", formatNumber(f["mbps"])) }},
		{limitDisk4K, "sequential 4 KiB appends, fdatasync after each", func(ctx context.Context) (figures, error) { return s.runDiskSync(ctx, 4<<10) },
			func(f figures) string {
				return fmt.Sprintf("%s fdatasyncs/s (%s ms each)", formatNumber(f["ops"]), formatNumber(1000/f["ops"]))
			}},
		{limitTCP, "TCP copy over 127.0.0.1, 1 MiB writes", s.runLoopbackTCP,
			func(f figures) string { return fmt.Sprintf("%s MB/s", formatNumber(f["mbps"])) }},
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
	return nil
}

// limitRows compares Wharf's Kafka produce bytes with the disk and loopback
// limits, when both were measured.
func (s *suite) limitRows(acksAll, acks1 produceSpec) {
	add := func(spec produceSpec, limitKey, limitName, note string) {
		w, ok := s.medians[spec.String()+"|Wharf"]
		l, ok2 := s.medians[limitKey]
		if !ok || !ok2 {
			return
		}
		s.rows = append(s.rows, row{
			Workload: spec.String() + ": record bytes", Unit: mbPerSec,
			Wharf: figureOr(w, "mbps"), Peer: limitName, PeerValue: figureOr(l, "mbps"), Notes: note, Limit: true,
		})
	}
	add(acksAll, limitDiskMiB, "limit: disk, 1 MiB write + fdatasync",
		"every acks=all reply waits for an fdatasync covering it; the limit is one writer syncing each 1 MiB, no protocol")
	add(acks1, limitTCP, "limit: loopback TCP copy",
		"acks=1 replies once the batch is in the page cache; the records cross loopback once")
}
