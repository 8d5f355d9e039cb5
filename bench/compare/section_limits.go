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

// diskLimitMethod is a way of appending 1 MiB batches durably: the best
// figure of diskLimitMethods is the disk limit of the acks=all rows.
type diskLimitMethod struct {
	key, name string // key in s.medians (limits section), name in the table
	run       func(s *suite, ctx context.Context) (figures, error)
}

var diskLimitMethods = []diskLimitMethod{
	{limitDiskPerBatch, "fdatasync per 1 MiB append",
		func(s *suite, ctx context.Context) (figures, error) { return s.runDiskSync(ctx, 1<<20) }},
	{limitDiskGroup, "group-commit appends",
		func(s *suite, ctx context.Context) (figures, error) { return s.runDiskGroupCommit(ctx, 1<<20) }},
}

// sameTurnDiskLimits are the disk-limit methods as limits of a comparison
// (run in the same turns as its contenders); they run in this process, so
// their figure "selfcpu" is their CPU.
func (s *suite) sameTurnDiskLimits() []contender {
	var cs []contender
	for _, m := range diskLimitMethods {
		cs = append(cs, contender{
			name: m.name,
			run:  func(ctx context.Context) (figures, error) { return m.run(s, ctx) },
		})
	}
	return cs
}

// busyCoreLimitName names the group-commit disk limit measured with one
// core kept busy (busyCoreDiskLimit).
const busyCoreLimitName = "group-commit appends, one core busy"

// busyCoreDiskLimit is the group-commit method again with a goroutine
// spinning on one of the cores meanwhile. On a two-core machine that
// stands for the CPU Wharf and its producer take beside Wharf's
// fdatasyncs (0.6 to 1 core between them), which the plain limit's
// appends never share: fdatasync needs CPU too (writeback, the journal
// commit, the completions of a virtual disk), and gets it later when both
// cores are busy.
func (s *suite) busyCoreDiskLimit() contender {
	return contender{name: busyCoreLimitName, run: func(ctx context.Context) (figures, error) {
		stop := make(chan struct{})
		spun := make(chan struct{})
		go func() {
			defer close(spun)
			spin(stop)
		}()
		defer func() {
			close(stop)
			<-spun
		}()
		return s.runDiskGroupCommit(ctx, 1<<20)
	}}
}

// spin keeps a core busy until stop is closed.
func spin(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
	}
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
	if name, best := s.diskLimit(""); !math.IsNaN(best) {
		s.limits = append(s.limits, fmt.Sprintf("disk limit of the acks=all rows, the better of the two methods above: %s MB/s (%s)", formatNumber(best), name))
	}
	return nil
}

// diskLimit is the best of the disk-limit methods measured, in MB/s, and
// its name; NaN when none was. With workload empty the figures are the
// limits section's, else those measured in the same turns as workload.
func (s *suite) diskLimit(workload string) (string, float64) {
	name, best := "", math.NaN()
	for _, m := range diskLimitMethods {
		f, ok := s.medians[diskLimitKey(m, workload)]
		if v := figureOr(f, "mbps"); ok && !math.IsNaN(v) && (math.IsNaN(best) || v > best) {
			name, best = m.name, v
		}
	}
	return name, best
}

// diskLimitKey is where s.medians keeps m's figures: the limits
// section's with workload empty, else those of the same turns as
// workload's runs (comparison.limits).
func diskLimitKey(m diskLimitMethod, workload string) string {
	if workload == "" {
		return m.key
	}
	return workload + "|" + m.name
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
	// The limit measured in the same turns as Wharf's runs, when the
	// Kafka section ran; else the limits section's, minutes away.
	workload, when := acksAll.String(), "measured in the same turns as Wharf's runs"
	if _, v := s.diskLimit(workload); math.IsNaN(v) {
		workload, when = "", "measured in the limits section, minutes before Wharf's runs"
	}
	var methods []string
	var sameTurn string // notes on the same-turn limit
	best, limit := s.diskLimit(workload)
	for _, m := range diskLimitMethods {
		f := s.medians[diskLimitKey(m, workload)]
		methods = append(methods, fmt.Sprintf("%s %s MB/s", m.name, formatNumber(figureOr(f, "mbps"))))
		if m.name == best && workload != "" {
			w := s.medians[workload+"|Wharf"]
			sameTurn = joinNotes(runRatiosNote(s.runs[workload+"|Wharf"], s.runs[diskLimitKey(m, workload)]),
				commitNote(w, f), limitCPUNote(w, f))
		}
	}
	add(acksAll, "limit: disk, "+best, limit, diskLimitTarget, joinNotes(
		"every acks=all reply waits for an fdatasync covering it; the limit is the better of two ways of appending 1 MiB batches to 1 GiB segment files durably, no protocol, "+
			when+": "+strings.Join(methods, ", "),
		sameTurn,
		s.sameTurnNote(acksAll, busyCoreLimitName, "with a goroutine spinning on one core meanwhile, group-commit appends"),
		s.sameTurnNote(acksAll, bareKafkaName, "the same producer against "+bareKafkaName+" (every batch's CRC-32C checked, one write per partition, group-committed fdatasync, nothing else) and its process's "+
			formatNumber(figureOr(s.medians[acksAll.String()+"|"+bareKafkaName], "cpu"))+" cores busy"),
		"Wharf's figure counts record values only (its log also holds about 1% of record and batch headers)"))
	add(acks1, "limit: loopback TCP copy", figureOr(s.medians[limitTCP], "mbps"), 0,
		"acks=1 replies once the batch is in the page cache; the records cross loopback once")
}

// runRatiosNote gives Wharf's MB/s over the limit's run by run (each pair
// measured in the same turn): the spread a median hides. Empty unless
// both sides have every run.
func runRatiosNote(wharf, limit []figures) string {
	if len(wharf) < 2 || len(wharf) != len(limit) {
		return ""
	}
	var ratios []string
	for i := range wharf {
		ratios = append(ratios, formatRatio(figureOr(wharf[i], "mbps")/figureOr(limit[i], "mbps")))
	}
	return "run by run: " + strings.Join(ratios, ", ")
}

// commitNote sets Wharf's group commit in its runs' windows (watchCommits)
// beside the limit's rounds: whether an fdatasync was in flight all the
// time, and how much each covered. Empty without Wharf's figures.
func commitNote(wharf, limit figures) string {
	rounds := figureOr(wharf, "rounds")
	if math.IsNaN(rounds) {
		return ""
	}
	return fmt.Sprintf("fdatasync rounds: Wharf %s/s of %s MB, one in flight %s%% of the time; the limit %s/s of %s MB",
		formatNumber(rounds), formatNumber(figureOr(wharf, "roundmb")), formatNumber(100*figureOr(wharf, "fsyncbusy")),
		formatNumber(figureOr(limit, "ops")), formatNumber(figureOr(limit, "mbps")/figureOr(limit, "ops")))
}

// limitCPUNote sets the cores the limit's appends and fdatasyncs kept busy
// beside those Wharf and its producer did: on a small machine the
// producer's CPU is CPU the disk's fdatasyncs do not get.
func limitCPUNote(wharf, limit figures) string {
	return fmt.Sprintf("cores busy: Wharf %s and its producer %s, the limit's appends %s",
		formatNumber(figureOr(wharf, "cpu")), formatNumber(figureOr(wharf, "selfcpu")), formatNumber(figureOr(limit, "selfcpu")))
}

// sameTurnNote sets Wharf's figure against the limit named name measured
// in the same turns as acksAll, saying what gave it; empty when the Kafka
// section did not measure it.
func (s *suite) sameTurnNote(acksAll produceSpec, name, what string) string {
	limit, ok := s.medians[acksAll.String()+"|"+name]
	if !ok {
		return ""
	}
	w, l := figureOr(s.medians[acksAll.String()+"|Wharf"], "mbps"), figureOr(limit, "mbps")
	return fmt.Sprintf("%s give %s MB/s: Wharf %s of that", what, formatNumber(l), formatRatio(w/l))
}
