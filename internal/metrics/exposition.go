package metrics

import (
	"io"
	"runtime"
	"strconv"
	"strings"
)

// exposition writes Prometheus's text format (version 0.0.4) to w through
// a buffer it reuses: the families with one sample per object are written
// sample by sample with it, without a prometheus.Metric or a dto.Metric
// per sample (expfmt alone took twenty times as long to encode them as
// appending the text does; page.go has the rest of the cost). It is also
// the io.Writer the registry's families are encoded to. The first error
// of w is kept and reported by flush; what is written after it is
// discarded.
type exposition struct {
	w   io.Writer
	buf []byte
	err error
	// labelled says whether the sample being written has a label yet.
	labelled bool
}

// flushAt is the buffered size at which the buffer goes to w.
const flushAt = 64 << 10

// Write buffers p (for expfmt.MetricFamilyToText).
func (e *exposition) Write(p []byte) (int, error) {
	e.buf = append(e.buf, p...)
	e.maybeFlush()
	return len(p), e.err
}

// family writes the HELP and TYPE lines that open a family.
func (e *exposition) family(name, help, kind string) {
	e.buf = append(e.buf, "# HELP "...)
	e.buf = append(e.buf, name...)
	e.buf = append(e.buf, ' ')
	e.buf = appendEscaped(e.buf, help, helpEscaper)
	e.buf = append(e.buf, "\n# TYPE "...)
	e.buf = append(e.buf, name...)
	e.buf = append(e.buf, ' ')
	e.buf = append(e.buf, kind...)
	e.buf = append(e.buf, '\n')
}

// begin starts a sample of family name; label and labelInt add its
// labels, in the order given (sorted by name, as client_golang writes
// them), and end writes its value.
func (e *exposition) begin(name string) {
	e.buf = append(e.buf, name...)
	e.labelled = false
}

func (e *exposition) label(name, value string) {
	e.openLabel(name)
	e.buf = appendEscaped(e.buf, value, labelEscaper)
	e.buf = append(e.buf, '"')
}

func (e *exposition) labelInt(name string, value int64) {
	e.openLabel(name)
	e.buf = strconv.AppendInt(e.buf, value, 10)
	e.buf = append(e.buf, '"')
}

func (e *exposition) openLabel(name string) {
	if e.labelled {
		e.buf = append(e.buf, ',')
	} else {
		e.buf = append(e.buf, '{')
		e.labelled = true
	}
	e.buf = append(e.buf, name...)
	e.buf = append(e.buf, `="`...)
}

// end writes the sample's value. Every object metric counts something,
// so values are integers, written exactly.
func (e *exposition) end(value int64) {
	if e.labelled {
		e.buf = append(e.buf, '}')
	}
	e.buf = append(e.buf, ' ')
	e.buf = strconv.AppendInt(e.buf, value, 10)
	e.buf = append(e.buf, '\n')
	e.maybeFlush()
}

// sample writes an unlabelled sample.
func (e *exposition) sample(name string, value int64) {
	e.begin(name)
	e.end(value)
}

// maybeFlush flushes a full buffer, then yields the P. On a broker with
// two Ps, one held by the group commit's fsync until the scheduler retakes
// it, a produce goroutine that became runnable would otherwise wait for
// the scrape to be preempted (its 10 ms time slice); every 64 KiB is
// every ~0.1 ms of the scrape's work.
func (e *exposition) maybeFlush() {
	if len(e.buf) >= flushAt {
		e.flush()
		runtime.Gosched()
	}
}

// flush writes out what is buffered and returns the first error of w.
func (e *exposition) flush() error {
	if e.err == nil && len(e.buf) > 0 {
		_, e.err = e.w.Write(e.buf)
	}
	e.buf = e.buf[:0]
	return e.err
}

// The text format escapes backslashes and line feeds in HELP text, and
// double quotes too in label values.
var (
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

// appendEscaped appends s to dst, escaped with r if it needs escaping
// (names seldom do, so the common case costs no allocation).
func appendEscaped(dst []byte, s string, r *strings.Replacer) []byte {
	for i := range len(s) {
		switch s[i] {
		case '\\', '\n', '"':
			return append(dst, r.Replace(s)...)
		}
	}
	return append(dst, s...)
}
