package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"syscall"
	"time"
)

// figures are the results of one run of a workload against one system,
// by metric key ("rate", "p99", ...).
type figures map[string]float64

// contender is one system's side of a comparison.
type contender struct {
	name string // "Wharf", or the peer's name as shown in the table
	run  func(ctx context.Context) (figures, error)
	// pid, when set, names the server process whose CPU time each run
	// records (figure "cpu": cores busy on average over the run). Every
	// run also records this process's ("selfcpu": the clients', or a
	// limit's appends).
	pid func() (int, error)
}

// metric is one figure of a workload that becomes one table row.
type metric struct {
	key   string
	label string // appended to the workload's name
	unit  unit
	// target, when above zero, is the Wharf/peer ratio Wharf is meant to
	// reach (row.Target).
	target float64
}

// comparison is a workload run against Wharf and (when available) one peer.
type comparison struct {
	workload string
	metrics  []metric
	wharf    contender
	peer     *contender // nil: no peer, see skip
	skip     string     // why the peer is missing
	// notes, when set, adds a note to each row from the median figures
	// (either map may be empty when that side failed or was skipped).
	notes func(m metric, wharf, peer figures) string
	// limits run in the same turns as Wharf and the peer, after them, so
	// that a ratio against a limit compares the same minutes of a shared
	// disk, whose speed drifts by a third from one minute to the next.
	// They make no rows of their own: their medians are kept in s.medians
	// under workload|name, for limitRows.
	limits []contender
}

// limitProgress is what the progress log shows of a limit's run.
var limitProgress = []metric{{key: "mbps", label: "MB/s", unit: mbPerSec}}

// outcome is the median figures of one contender over all runs, or the
// error that stopped it.
type outcome struct {
	medians figures
	err     error
}

// compare runs c: every run does Wharf, then the peer, then the limits, so
// slow drift on the machine hits every side alike. A contender that fails
// stops being run and its figures become "—" with the error in the notes;
// the suite goes on.
func (s *suite) compare(ctx context.Context, c comparison) error {
	s.logf("== %s", c.workload)
	sides := []*contender{&c.wharf}
	if c.peer != nil {
		sides = append(sides, c.peer)
	}
	rowSides := len(sides)
	for i := range c.limits {
		sides = append(sides, &c.limits[i])
	}
	samples := make([][]figures, len(sides))
	errs := make([]error, len(sides))
	for run := 1; run <= s.opts.runs; run++ {
		for i, side := range sides {
			if errs[i] != nil {
				continue
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			// Write back what earlier runs left dirty in the page cache, so
			// it does not slow this run's fsyncs.
			syscall.Sync()
			start := time.Now()
			cpu0, self0 := side.cpuSeconds(), selfCPUSeconds()
			f, err := side.run(ctx)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if cpu1 := side.cpuSeconds(); err == nil && cpu0 >= 0 && cpu1 >= cpu0 {
				f["cpu"] = (cpu1 - cpu0) / time.Since(start).Seconds()
			}
			if self1 := selfCPUSeconds(); err == nil && self0 >= 0 && self1 >= self0 {
				f["selfcpu"] = (self1 - self0) / time.Since(start).Seconds()
			}
			if err != nil {
				errs[i] = err
				s.logf("   run %d %-28s failed: %v", run, side.name, err)
				continue
			}
			samples[i] = append(samples[i], f)
			shown := c.metrics
			if i >= rowSides {
				shown = limitProgress
			}
			s.logf("   run %d %-28s %s (%.1fs)", run, side.name, summarize(shown, f), time.Since(start).Seconds())
		}
	}
	out := make([]outcome, len(sides))
	for i, side := range sides {
		out[i] = outcome{medians: medianFigures(samples[i]), err: errs[i]}
		s.medians[c.workload+"|"+side.name] = out[i].medians
		s.runs[c.workload+"|"+side.name] = samples[i]
	}
	s.addRows(c, out[:rowSides])
	return nil
}

// addRows turns the outcomes of c into table rows, one per metric.
func (s *suite) addRows(c comparison, out []outcome) {
	wharf := out[0]
	peer := outcome{medians: figures{}}
	if len(out) > 1 {
		peer = out[1]
	}
	for _, m := range c.metrics {
		r := row{
			Workload:  c.workload + ": " + m.label,
			Unit:      m.unit,
			Wharf:     figureOr(wharf.medians, m.key),
			PeerValue: figureOr(peer.medians, m.key),
			Target:    m.target,
		}
		var notes []string
		if c.peer != nil {
			r.Peer = c.peer.name
		} else {
			notes = append(notes, "peer skipped: "+c.skip)
		}
		first := m.key == c.metrics[0].key
		if wharf.err != nil {
			notes = append(notes, failureNote(first, "Wharf", wharf.err))
		}
		if peer.err != nil {
			notes = append(notes, failureNote(first, "peer", peer.err))
		}
		if c.notes != nil {
			notes = append(notes, c.notes(m, wharf.medians, peer.medians))
		}
		if first {
			notes = append(notes, cpuNote(wharf.medians, peer.medians))
		}
		r.Notes = joinNotes(notes...)
		s.rows = append(s.rows, r)
	}
}

// medianFigures is the per-metric median of runs.
func medianFigures(runs []figures) figures {
	out := figures{}
	byKey := map[string][]float64{}
	for _, f := range runs {
		for k, v := range f {
			byKey[k] = append(byKey[k], v)
		}
	}
	for k, vs := range byKey {
		out[k] = median(vs)
	}
	return out
}

// figureOr returns f[key], or NaN when it is missing.
func figureOr(f figures, key string) float64 {
	if v, ok := f[key]; ok {
		return v
	}
	return math.NaN()
}

// summarize prints a run's figures for the progress log.
func summarize(ms []metric, f figures) string {
	var s string
	for _, m := range ms {
		s += fmt.Sprintf(" %s=%s", m.key, formatNumber(figureOr(f, m.key)))
	}
	return s
}

// window is a run's measurement interval: events before start are warm-up
// and are not counted.
type window struct{ start, end time.Time }

// newWindow starts a run now: warm-up, then -duration of measurement.
func (s *suite) newWindow() window {
	start := time.Now().Add(s.opts.warmup)
	return window{start: start, end: start.Add(s.opts.duration)}
}

func (w window) contains(t time.Time) bool { return !t.Before(w.start) && t.Before(w.end) }

// seconds is the measured length of the window.
func (w window) seconds() float64 { return w.end.Sub(w.start).Seconds() }

// sleepUntil waits until t or until ctx is done.
func sleepUntil(ctx context.Context, t time.Time) error {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// cpuSeconds is the server's CPU time so far, or -1 when unknown.
func (c *contender) cpuSeconds() float64 {
	if c.pid == nil {
		return -1
	}
	pid, err := c.pid()
	if err != nil {
		return -1
	}
	secs, err := processCPUSeconds(pid)
	if err != nil {
		return -1
	}
	return secs
}

// selfCPUSeconds is the CPU time this process (the clients, or a disk
// limit's appends) has used, or -1 where it cannot be read.
func selfCPUSeconds() float64 {
	secs, err := processCPUSeconds(os.Getpid())
	if err != nil {
		return -1
	}
	return secs
}

// cpuNote says how busy each server was during its runs: near the core
// count means it was CPU-bound; far below means it waited (for the disk,
// the network or its clients).
func cpuNote(w, p figures) string {
	wc, pc := figureOr(w, "cpu"), figureOr(p, "cpu")
	if math.IsNaN(wc) && math.IsNaN(pc) {
		return ""
	}
	return fmt.Sprintf("server CPU, cores busy: %s (Wharf), %s (peer)", formatNumber(wc), formatNumber(pc))
}

// failureNote gives a failed side's error on a comparison's first row and
// points back to it on the others.
func failureNote(first bool, side string, err error) string {
	if first {
		return side + " failed: " + err.Error()
	}
	return side + " failed (see above)"
}
