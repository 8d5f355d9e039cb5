package nats

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// recorder is a handler that writes down every operation.
type recorder struct {
	ops       []string
	headers   bool
	connected bool
}

func (r *recorder) beforeOp(isConnect bool) error { return nil }
func (r *recorder) connect(arg []byte) error {
	r.ops = append(r.ops, "CONNECT "+string(arg))
	r.headers = strings.Contains(string(arg), `"headers":true`)
	return nil
}
func (r *recorder) pubArgs(p *pubArgs) error {
	if p.headerLen >= 0 && !r.headers {
		return errProtocol
	}
	if p.size > 1<<20 {
		return errMaxPayload
	}
	return nil
}
func (r *recorder) msg(p *pubArgs, body []byte) error {
	r.ops = append(r.ops, fmt.Sprintf("PUB %s %s %d %q", p.subject, p.reply, p.headerLen, body))
	return nil
}
func (r *recorder) sub(subject, queue, sid []byte) error {
	r.ops = append(r.ops, fmt.Sprintf("SUB %s %s %s", subject, queue, sid))
	return nil
}
func (r *recorder) unsub(sid []byte, max int) error {
	r.ops = append(r.ops, fmt.Sprintf("UNSUB %s %d", sid, max))
	return nil
}
func (r *recorder) ping() error { r.ops = append(r.ops, "PING"); return nil }
func (r *recorder) pong()       { r.ops = append(r.ops, "PONG") }
func (r *recorder) clientErr(arg []byte) error {
	r.ops = append(r.ops, "-ERR "+string(arg))
	return errProtocol
}

// parseInPieces feeds input to a fresh parser in pieces cut at cuts,
// reusing (and scribbling over) one read buffer as a connection does.
func parseInPieces(input []byte, cuts []int) ([]string, error) {
	p := parser{maxControlLine: DefaultMaxControlLine}
	r := &recorder{}
	readBuf := make([]byte, len(input))
	start := 0
	for _, end := range append(cuts, len(input)) {
		if end < start || end > len(input) {
			continue
		}
		n := copy(readBuf, input[start:end])
		err := p.parse(readBuf[:n], r)
		for i := range readBuf[:n] {
			readBuf[i] = '#' // a later read overwrites the buffer
		}
		if err != nil {
			return r.ops, err
		}
		if len(p.line) > DefaultMaxControlLine+len("CONNECT ")+n {
			return r.ops, fmt.Errorf("kept a %d-byte partial line", len(p.line))
		}
		start = end
	}
	return r.ops, nil
}

const sampleStream = "CONNECT {\"verbose\":false,\"headers\":true}\r\n" +
	"SUB foo.* q 1\r\nsub bar 2\r\nPUB foo.x _INBOX.1 5\r\nhello\r\n" +
	"HPUB bar 12 14\r\nNATS/1.0\r\n\r\nhi\r\nPUB foo.y 0\r\n\r\nUNSUB 1 10\r\nUNSUB 2\r\nPING\r\nPONG\r\n+OK\r\n"

func TestParserSplitAnywhere(t *testing.T) {
	want, err := parseInPieces([]byte(sampleStream), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != 10 {
		t.Fatalf("parsed %d operations, want 10: %q", len(want), want)
	}
	for i := range len(sampleStream) {
		for j := i; j < len(sampleStream); j += 7 {
			got, err := parseInPieces([]byte(sampleStream), []int{i, j})
			if err != nil || strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("cut at %d and %d: %q, %v; want %q", i, j, got, err, want)
			}
		}
	}
}

func TestParserErrors(t *testing.T) {
	cases := map[string]error{
		"FOO\r\n":                errUnknownOp,
		"PUBX foo 1\r\n":         errUnknownOp,
		"\r\n":                   errUnknownOp,
		"PUB foo 1\r\nxy\r\n":    errUnknownOp,
		"MSG foo 1 1\r\n":        errUnknownOp,
		"PUB foo\r\n":            errProtocol,
		"PUB foo 1234567890\r\n": errProtocol, // ten digits: no size
		"SUB a b c d\r\n":        errProtocol,
		"UNSUB 1 2 3\r\n":        errProtocol,
		"HPUB foo 1 1\r\n":       errProtocol, // headers not enabled
		"PUB foo 2000000\r\n":    errMaxPayload,
		"-ERR 'boom'\r\n":        errProtocol,
		"SUB " + strings.Repeat("a", 5000) + " 1\r\n": errControlLine,
	}
	for input, want := range cases {
		if _, err := parseInPieces([]byte(input), nil); !errors.Is(err, want) {
			t.Errorf("%q: %v, want %v", input, err, want)
		}
	}
	// Garbage is refused as soon as it cannot begin an operation, and an
	// endless line once it is too long, without waiting for a line end.
	if _, err := parseInPieces([]byte("XYZ"), nil); err != errUnknownOp {
		t.Errorf("partial garbage: %v", err)
	}
	if _, err := parseInPieces([]byte("PUB "+strings.Repeat("a", 10000)), nil); err != errControlLine {
		t.Errorf("endless line: %v", err)
	}
}

// FuzzParser checks that no input makes the parser panic or keep an
// unbounded line, and that how the input is cut into reads never changes
// what is parsed.
func FuzzParser(f *testing.F) {
	f.Add([]byte(sampleStream), uint16(7), uint16(40))
	f.Add([]byte("PUB a 3\r\nabc\r\nPING\r\n"), uint16(1), uint16(12))
	f.Add([]byte("HPUB a 2 1\r\n"), uint16(0), uint16(0))
	f.Add([]byte("CONNECT {\"headers\":true}\r\nHPUB a r 4 4\r\nabcd\r\n"), uint16(30), uint16(31))
	f.Fuzz(func(t *testing.T, input []byte, cut1, cut2 uint16) {
		whole, wholeErr := parseInPieces(input, nil)
		cuts := []int{int(cut1) % (len(input) + 1), int(cut2) % (len(input) + 1)}
		if cuts[0] > cuts[1] {
			cuts[0], cuts[1] = cuts[1], cuts[0]
		}
		pieces, piecesErr := parseInPieces(input, cuts)
		if wholeErr == nil && piecesErr == nil && strings.Join(whole, "\n") != strings.Join(pieces, "\n") {
			t.Fatalf("whole: %q\ncut at %v: %q", whole, cuts, pieces)
		}
		if (wholeErr == nil) != (piecesErr == nil) && !earlyRefusal(wholeErr, piecesErr) {
			t.Fatalf("whole: %v, cut at %v: %v", wholeErr, cuts, piecesErr)
		}
	})
}

// earlyRefusal reports whether the cut input was refused for a partial
// line at a cut (garbage, or too long): the whole input has that line
// complete and refuses it too, except that a whole PING line's tail of
// any length is ignored, as nats-server ignores it.
func earlyRefusal(whole, pieces error) bool {
	return whole == nil && (pieces == errUnknownOp || pieces == errControlLine)
}
