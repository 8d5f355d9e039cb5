package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// outputFormat is --output: how list and describe commands print.
type outputFormat string

const (
	outputTable outputFormat = "table" // aligned columns for people
	outputJSON  outputFormat = "json"  // one JSON document for scripts
)

func (o *outputFormat) String() string { return string(*o) }

func (o *outputFormat) Set(v string) error {
	switch outputFormat(v) {
	case outputTable, outputJSON:
		*o = outputFormat(v)
		return nil
	}
	return fmt.Errorf("want table or json")
}

// addOutputFlag adds --output to a list or describe command.
func addOutputFlag(fs *flag.FlagSet) *outputFormat {
	o := outputTable
	fs.Var(&o, "output", "output `format`: table, or json for scripts")
	return &o
}

// writeJSON prints v as indented JSON.
func writeJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// maxAlignedWidth is the widest cell that sets its column's width. A
// longer one (a topic name may have 249 characters) pushes the rest of its
// own line to the right, so that the other lines stay narrow.
const maxAlignedWidth = 48

// table prints aligned columns, as rpk does.
type table struct {
	out  io.Writer
	rows [][]string
}

func newTable(out io.Writer, header ...string) *table {
	t := &table{out: out}
	if len(header) > 0 {
		t.rows = append(t.rows, header)
	}
	return t
}

func (t *table) row(cells ...any) {
	r := make([]string, len(cells))
	for i, c := range cells {
		r[i] = fmt.Sprint(c)
	}
	t.rows = append(t.rows, r)
}

// flush writes the rows, each column as wide as its widest cell of at
// most maxAlignedWidth, two spaces apart.
func (t *table) flush() error {
	var widths []int
	for _, r := range t.rows {
		for i, c := range r {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			if n := utf8.RuneCountInString(c); n <= maxAlignedWidth {
				widths[i] = max(widths[i], n)
			}
		}
	}
	var b strings.Builder
	for _, r := range t.rows {
		for i, c := range r {
			b.WriteString(c)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", max(2, widths[i]+2-utf8.RuneCountInString(c))))
			}
		}
		b.WriteByte('\n')
	}
	t.rows = nil
	_, err := io.WriteString(t.out, b.String())
	return err
}

func section(out io.Writer, title string) {
	fmt.Fprintf(out, "%s\n%s\n", title, strings.Repeat("=", len(title)))
}
