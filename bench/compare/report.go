package main

import (
	"fmt"
	"runtime"
	"strings"
	"time"
)

// report renders docs/benchmarks.md: how the figures were made, the
// machine, the peers, the machine's limits and the table.
func (s *suite) report(m machine, took time.Duration) string {
	var b strings.Builder
	o := s.opts
	b.WriteString("# Wharf beside its peers\n\n")
	b.WriteString("Written by `go run ./bench/compare")
	for _, f := range s.flagsUsed() {
		b.WriteString(" " + f)
	}
	fmt.Fprintf(&b, "` on %s (%v in all). See `bench/compare/README.md` for what each row measures.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), took.Round(time.Second))
	fmt.Fprintf(&b, "Each figure is the median of %d run(s) of %v, each after a %v warm-up; Wharf and the peer take turns run by run. "+
		"Every server is a separate process on 127.0.0.1 with its data on the same disk; the clients run in the benchmark process, "+
		"so servers and clients share the machine's %d cores. Ratios are Wharf / peer: above 1 is better for Wharf on throughput, "+
		"below 1 is better on rows marked ↓ (times, latencies, memory, files).\n\n", o.runs, o.duration, o.warmup, m.cores)

	b.WriteString("## Machine\n\n")
	fmt.Fprintf(&b, "- CPU: %s, %d cores (GOMAXPROCS %d)\n", m.cpu, m.cores, runtime.GOMAXPROCS(0))
	fmt.Fprintf(&b, "- Memory: %s\n", m.memory)
	fmt.Fprintf(&b, "- Kernel: %s; open-file limit (soft / hard) of the servers: %s\n", m.kernel, openFileLimit())
	fmt.Fprintf(&b, "- Data directory: %s\n", m.disk)
	fmt.Fprintf(&b, "- Load average (1/5/15 min) at start: %s, at end: %s (other work on the machine moves the figures)\n", s.loadAtStart, loadAverage())
	fmt.Fprintf(&b, "- Go: %s\n", m.goVersion)
	fmt.Fprintf(&b, "- Wharf: %s, `wharf serve` built from it with default settings (fsync before acks=all replies and confirms, group-committed)\n", s.wharfVersion())
	for _, v := range s.versions {
		fmt.Fprintf(&b, "- %s\n", v)
	}
	for _, v := range s.skipped {
		fmt.Fprintf(&b, "- Not measured: %s\n", v)
	}
	if len(s.limits) > 0 {
		b.WriteString("\nLimits of this machine, measured in the same run on the same disk:\n\n")
		for _, l := range s.limits {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	b.WriteString("\n## Results\n\n")
	writeMarkdown(&b, s.rows)
	if behind := s.behindRows(); len(behind) > 0 {
		b.WriteString("\nRows where Wharf is behind its peer in this run:\n\n")
		for _, r := range behind {
			fmt.Fprintf(&b, "- %s (%s vs %s, %s)\n", r.Workload, formatFigure(r.Wharf, r.Unit), formatFigure(r.PeerValue, r.Unit), r.Peer)
		}
	}
	if targets := s.targetRows(); len(targets) > 0 {
		b.WriteString("\nTargets:\n\n")
		for _, r := range targets {
			fmt.Fprintf(&b, "- %s: %s against %s (%s)\n", r.Workload, formatRatio(r.ratio()), r.Peer, r.targetNote())
		}
	}
	return b.String()
}

// targetRows are the rows that have a target.
func (s *suite) targetRows() []row {
	var out []row
	for _, r := range s.rows {
		if r.Target > 0 {
			out = append(out, r)
		}
	}
	return out
}

// behindRows are the rows the peer wins.
func (s *suite) behindRows() []row {
	var out []row
	for _, r := range s.rows {
		if r.wharfBehind() {
			out = append(out, r)
		}
	}
	return out
}

// flagsUsed is the command line to reproduce this document, defaults left
// out.
func (s *suite) flagsUsed() []string {
	o := s.opts
	var f []string
	switch {
	case o.quick:
		f = append(f, "-quick")
	default:
		if o.duration != 5*time.Second {
			f = append(f, "-duration "+o.duration.String())
		}
		if o.warmup != time.Second {
			f = append(f, "-warmup "+o.warmup.String())
		}
		if o.runs != 3 {
			f = append(f, fmt.Sprintf("-runs %d", o.runs))
		}
	}
	if o.full {
		f = append(f, "-full")
	}
	if o.scale {
		f = append(f, "-scale")
	}
	if o.only != "" {
		f = append(f, "-only "+o.only)
	}
	if o.clusterDevices != "" {
		f = append(f, "-cluster-devices "+o.clusterDevices)
	}
	// The settings of the cost-of-scale sections that ran, when not the
	// defaults.
	if s.selected("idle", true) && o.idleConns != 5000 {
		f = append(f, fmt.Sprintf("-idle-conns %d", o.idleConns))
	}
	if s.selected("catchup", true) && o.catchupGiB != 2 {
		f = append(f, fmt.Sprintf("-catchup-gib %g", o.catchupGiB))
	}
	if s.selected("scale", true) {
		if o.scaleGiB != 10 {
			f = append(f, fmt.Sprintf("-scale-gib %g", o.scaleGiB))
		}
		if o.scaleCount != 10000 {
			f = append(f, fmt.Sprintf("-scale-count %d", o.scaleCount))
		}
	}
	return f
}
