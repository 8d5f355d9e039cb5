package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// unit says how a figure is printed and which direction is better.
type unit struct {
	suffix      string // printed after the number: "msg/s", "ms", "MiB"
	lowerBetter bool
	integer     bool // a count: printed rounded, never with decimals
}

var (
	msgsPerSec = unit{suffix: "msg/s"}
	mbPerSec   = unit{suffix: "MB/s"}
	opsPerSec  = unit{suffix: "ops/s"}
	msLatency  = unit{suffix: "ms", lowerBetter: true}
	msTime     = unit{suffix: "ms", lowerBetter: true}
	seconds    = unit{suffix: "s", lowerBetter: true}
	mebibytes  = unit{suffix: "MiB", lowerBetter: true}
	kibibytes  = unit{suffix: "KiB", lowerBetter: true}
	coresBusy  = unit{suffix: "cores", lowerBetter: true}
	fileCount  = unit{suffix: "fds", lowerBetter: true, integer: true}
)

// row is one line of the table: a workload's figure for Wharf beside one
// peer's. A figure that was not measured is NaN; Peer is "" when the row has
// no peer (and "skipped: ..." text goes in Notes).
type row struct {
	Workload  string
	Unit      unit
	Wharf     float64
	Peer      string
	PeerValue float64
	Notes     string
	// Limit marks a row whose "peer" is a physical limit of the machine:
	// it can be approached, not beaten, so the row gets no verdict.
	Limit bool
	// Target, when above zero, is the Wharf/peer ratio Wharf is meant to
	// reach on this row (at least; at most on a row marked ↓).
	Target float64
}

// ratio is Wharf / peer, or NaN when either figure is missing or the peer's
// is zero.
func (r row) ratio() float64 {
	if math.IsNaN(r.Wharf) || math.IsNaN(r.PeerValue) || r.PeerValue == 0 {
		return math.NaN()
	}
	return r.Wharf / r.PeerValue
}

// wharfBehind reports whether the peer's figure is better than Wharf's.
func (r row) wharfBehind() bool {
	q := r.ratio()
	if math.IsNaN(q) || r.Limit {
		return false
	}
	if r.Unit.lowerBetter {
		return q > 1
	}
	return q < 1
}

// targetNote says whether the row met its target, or "" when it has none.
func (r row) targetNote() string {
	if r.Target <= 0 {
		return ""
	}
	q := r.ratio()
	cmp, met := "≥", q >= r.Target
	if r.Unit.lowerBetter {
		cmp, met = "≤", q <= r.Target
	}
	verdict := "**not met**"
	switch {
	case math.IsNaN(q):
		verdict = "not measured"
	case met:
		verdict = "met"
	}
	return fmt.Sprintf("target %s %s×: %s", cmp, strconv.FormatFloat(r.Target, 'f', -1, 64), verdict)
}

// writeMarkdown writes rows as one Markdown table.
func writeMarkdown(w io.Writer, rows []row) error {
	var b strings.Builder
	b.WriteString("| workload | Wharf | peer | peer figure | Wharf/peer | notes |\n")
	b.WriteString("|---|---:|---|---:|---:|---|\n")
	for _, r := range rows {
		peer := r.Peer
		if peer == "" {
			peer = "—"
		}
		notes := joinNotes(r.targetNote(), r.Notes)
		if r.wharfBehind() {
			notes = joinNotes("**Wharf behind**", notes)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n",
			cell(r.Workload+direction(r.Unit)), cell(formatFigure(r.Wharf, r.Unit)), cell(peer),
			cell(formatFigure(r.PeerValue, r.Unit)), formatRatio(r.ratio()), cell(notes))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// direction marks figures where lower is better, so a ratio below 1 reads
// as a win.
func direction(u unit) string {
	if u.lowerBetter {
		return " ↓"
	}
	return ""
}

// joinNotes joins non-empty note fragments with "; ".
func joinNotes(parts ...string) string {
	var kept []string
	for _, p := range parts {
		if p != "" {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, "; ")
}

// cell escapes the characters that would break a Markdown table cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}

// formatFigure prints v with its unit: thousands separators from 1000 up,
// three significant digits below, "—" for a missing figure.
func formatFigure(v float64, u unit) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "—"
	}
	if u.integer {
		return formatCount(v) + " " + u.suffix
	}
	return formatNumber(v) + " " + u.suffix
}

// formatNumber prints v as an integer with thousands separators when
// |v| >= 1000, else with three significant digits.
func formatNumber(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "—"
	}
	if math.Abs(v) >= 1000 {
		return groupThousands(strconv.FormatInt(int64(math.Round(v)), 10))
	}
	if v == 0 {
		return "0"
	}
	digits := 2 - int(math.Floor(math.Log10(math.Abs(v))))
	digits = max(0, digits)
	return strconv.FormatFloat(v, 'f', digits, 64)
}

// groupThousands inserts commas into a decimal integer string.
func groupThousands(s string) string {
	sign := ""
	if strings.HasPrefix(s, "-") {
		sign, s = "-", s[1:]
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return sign + b.String()
}

// formatRatio prints a Wharf/peer ratio as "2.31×", or "—".
func formatRatio(q float64) string {
	if math.IsNaN(q) || math.IsInf(q, 0) {
		return "—"
	}
	return strconv.FormatFloat(q, 'f', 2, 64) + "×"
}

// formatCount prints a count rounded to an integer, with thousands
// separators.
func formatCount(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "—"
	}
	return groupThousands(strconv.FormatInt(int64(math.Round(v)), 10))
}
