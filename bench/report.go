package main

import (
	"fmt"
	"io"
	"strings"
)

// row is one line of the results table: a Wharf figure beside a baseline.
type row struct {
	workload string
	wharf    result
	baseline string
	base     result
	target   float64 // required ratio; 0 for a row shown for information
}

func (r row) ratio() float64 {
	if b := r.base.mbps(); b > 0 {
		return r.wharf.mbps() / b
	}
	return 0
}

// targetCell says whether the row meets its target.
func (r row) targetCell() string {
	if r.target == 0 {
		return "—"
	}
	verdict := "met"
	if r.ratio() < r.target {
		verdict = "**not met**"
	}
	return fmt.Sprintf("≥ %.0f%%: %s", r.target*100, verdict)
}

// writeTable prints rows as one Markdown table followed by notes.
func writeTable(w io.Writer, rows []row, notes []string) {
	fmt.Fprintln(w, "| Workload | Wharf MB/s | Wharf records/s | Baseline | Baseline MB/s | Ratio | Target |")
	fmt.Fprintln(w, "|---|---:|---:|---|---:|---:|---|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %.1f | %s | %s | %.1f | %.1f%% | %s |\n",
			r.workload, r.wharf.mbps(), thousands(r.wharf.recordsPerSec()), r.baseline, r.base.mbps(), r.ratio()*100, r.targetCell())
	}
	if len(notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range notes {
			fmt.Fprintln(w, "- "+n)
		}
	}
}

// thousands formats a rate with thousands separators: 123456.7 -> "123,457".
func thousands(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// sizeString formats a byte count in binary units: 65536 -> "64.0 KiB".
func sizeString(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	default:
		return fmt.Sprintf("%d B", n)
	}
}
