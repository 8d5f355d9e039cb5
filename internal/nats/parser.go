package nats

import "bytes"

// handler receives the operations the parser finds, in order. An error it
// returns stops the parse and ends the connection.
type handler interface {
	// beforeOp runs for every complete control line, before its
	// operation: the place to refuse anything but CONNECT until the
	// client has authenticated.
	beforeOp(isConnect bool) error
	connect(arg []byte) error
	// pubArgs checks a PUB or HPUB's arguments before its payload is
	// read, so that an oversized one is refused without buffering it.
	pubArgs(p *pubArgs) error
	// msg delivers a complete PUB or HPUB; body is the header block
	// followed by the payload, without the trailing CRLF.
	msg(p *pubArgs, body []byte) error
	sub(subject, queue, sid []byte) error
	unsub(sid []byte, max int) error
	ping() error
	pong()
	// clientErr is a client's -ERR: nats-server closes the connection.
	clientErr(arg []byte) error
}

// pubArgs is a parsed PUB or HPUB line. Its slices point into line.
type pubArgs struct {
	line      []byte
	subject   []byte
	reply     []byte
	headerLen int // -1 for PUB
	size      int // header and payload bytes
}

// hasHeader reports whether the message carries a header block (an HPUB
// with a header length of 0 is delivered as a plain MSG, as nats-server
// does).
func (p *pubArgs) hasHeader() bool { return p.headerLen > 0 }

// parser splits a client's byte stream into protocol operations. It
// works on each read buffer in place and keeps only what a read left
// unfinished: the start of a control line, or a partial payload.
type parser struct {
	maxControlLine int

	line      []byte // start of a control line split across reads
	inPayload bool   // pub is waiting for its payload
	pub       pubArgs
	// pubOwned: pub's slices point into line, not into a read buffer
	// the caller will reuse.
	pubOwned bool
	payload  []byte // payload (plus CRLF) split across reads; nil until one is
	spare    []byte // a payload buffer kept for the next split payload
}

// keptPayloadBuffer is the largest split-payload buffer kept for the next
// message; a larger one goes back to the garbage collector.
const keptPayloadBuffer = 64 << 10

// parse consumes buf, calling h for each complete operation. buf may be
// reused by the caller once parse returns.
func (p *parser) parse(buf []byte, h handler) error {
	for len(buf) > 0 {
		if p.inPayload {
			var err error
			if buf, err = p.consumePayload(buf, h); err != nil {
				return err
			}
			continue
		}
		end := bytes.IndexByte(buf, '\n')
		if end < 0 {
			return p.keepPartialLine(buf)
		}
		line := buf[:end]
		owned := len(p.line) > 0
		if owned {
			p.line = append(p.line, line...)
			line = p.line
		}
		buf = buf[end+1:]
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		if err := p.operation(line, h); err != nil {
			return err
		}
		if p.inPayload {
			p.pubOwned = owned
		} else {
			p.line = p.line[:0]
		}
	}
	if p.inPayload && !p.pubOwned {
		// The payload continues in the next read, which will reuse the
		// read buffer the PUB line sits in: keep a copy.
		p.line = append(p.line[:0], p.pub.line...)
		p.pub.repoint(p.line)
		p.pubOwned = true
	}
	return nil
}

// keepPartialLine holds the start of a control line until its end
// arrives, refusing at once what can be no operation or is too long.
func (p *parser) keepPartialLine(buf []byte) error {
	p.line = append(p.line, buf...)
	if len(p.line) > p.maxControlLine+len("CONNECT ") {
		return errControlLine
	}
	if !opPrefixValid(p.line) {
		return errUnknownOp
	}
	return nil
}

// consumePayload takes the awaited payload and its CRLF from buf, from
// the read buffer directly when it is all there, and returns what follows.
func (p *parser) consumePayload(buf []byte, h handler) ([]byte, error) {
	need := p.pub.size + 2
	if p.payload == nil && len(buf) >= need {
		if err := p.finishPayload(buf[:need], h); err != nil {
			return nil, err
		}
		return buf[need:], nil
	}
	if p.payload == nil {
		if cap(p.spare) >= need {
			p.payload = p.spare[:0]
		} else {
			p.payload = make([]byte, 0, need)
		}
	}
	take := min(need-len(p.payload), len(buf))
	p.payload = append(p.payload, buf[:take]...)
	buf = buf[take:]
	if len(p.payload) == need {
		full := p.payload
		p.payload = nil
		if cap(full) <= keptPayloadBuffer {
			p.spare = full
		}
		if err := p.finishPayload(full, h); err != nil {
			return nil, err
		}
	}
	return buf, nil
}

// finishPayload checks the CRLF after a payload and hands the message on.
func (p *parser) finishPayload(body []byte, h handler) error {
	n := len(body)
	if body[n-2] != '\r' || body[n-1] != '\n' {
		return errUnknownOp
	}
	err := h.msg(&p.pub, body[:n-2])
	p.inPayload, p.pubOwned, p.pub = false, false, pubArgs{}
	p.line = p.line[:0]
	return err
}

// An op is one client operation's keyword and how its arguments start.
type op struct {
	word string
	// sep: the keyword must be followed by a space or tab (PUB, SUB,
	// ...); otherwise anything may follow (PING's trailing bytes are
	// ignored, CONNECT's JSON may follow directly).
	sep bool
}

var (
	opConnect = op{"CONNECT", false}
	opPub     = op{"PUB", true}
	opHPub    = op{"HPUB", true}
	opSub     = op{"SUB", true}
	opUnsub   = op{"UNSUB", true}
	opPing    = op{"PING", false}
	opPong    = op{"PONG", false}
	opInfo    = op{"INFO", false}
	opOK      = op{"+OK", false}
	opErr     = op{"-ERR", true}
	clientOps = []op{opConnect, opPub, opHPub, opSub, opUnsub, opPing, opPong, opInfo, opOK, opErr}
)

// match reports whether line starts with the op's keyword (in any case)
// and, for a keyword that needs one, a separator; args is what follows,
// leading white space removed.
func (o op) match(line []byte) (args []byte, ok bool) {
	if len(line) < len(o.word) || !equalFold(line[:len(o.word)], o.word) {
		return nil, false
	}
	rest := line[len(o.word):]
	if o.sep && (len(rest) == 0 || !isSpace(rest[0])) {
		return nil, false
	}
	return bytes.TrimLeft(rest, " \t"), true
}

// opPrefixValid reports whether an incomplete control line can still
// become a client operation.
func opPrefixValid(partial []byte) bool {
	for _, o := range clientOps {
		n := min(len(partial), len(o.word))
		if !equalFold(partial[:n], o.word[:n]) {
			continue
		}
		if !o.sep || len(partial) == n || isSpace(partial[n]) {
			return true
		}
	}
	return false
}

// operation runs one complete control line (without its line end).
func (p *parser) operation(line []byte, h handler) error {
	if len(line) == 0 {
		return errUnknownOp
	}
	args, isConnect := opConnect.match(line)
	if err := h.beforeOp(isConnect); err != nil {
		return err
	}
	if isConnect {
		if len(args) > p.maxControlLine {
			return errControlLine
		}
		return h.connect(args)
	}
	if args, ok := opPub.match(line); ok {
		return p.startPub(line, args, false, h)
	}
	if args, ok := opHPub.match(line); ok {
		return p.startPub(line, args, true, h)
	}
	if args, ok := opSub.match(line); ok {
		if len(args) > p.maxControlLine {
			return errControlLine
		}
		var f [4][]byte
		fields := splitFields(args, f[:0])
		switch len(fields) {
		case 2:
			return h.sub(fields[0], nil, fields[1])
		case 3:
			return h.sub(fields[0], fields[1], fields[2])
		}
		return errProtocol
	}
	if args, ok := opUnsub.match(line); ok {
		if len(args) > p.maxControlLine {
			return errControlLine
		}
		var f [3][]byte
		fields := splitFields(args, f[:0])
		switch len(fields) {
		case 1:
			return h.unsub(fields[0], -1)
		case 2:
			return h.unsub(fields[0], parseSize(fields[1]))
		}
		return errProtocol
	}
	if _, ok := opPing.match(line); ok {
		return h.ping()
	}
	if _, ok := opPong.match(line); ok {
		h.pong()
		return nil
	}
	if args, ok := opErr.match(line); ok {
		return h.clientErr(args)
	}
	// A client's INFO and +OK mean nothing to a server.
	if _, ok := opInfo.match(line); ok {
		return nil
	}
	if _, ok := opOK.match(line); ok {
		return nil
	}
	return errUnknownOp
}

// startPub parses a PUB or HPUB line and, once the handler accepts it,
// waits for the payload.
func (p *parser) startPub(line, args []byte, withHeader bool, h handler) error {
	if len(args) > p.maxControlLine {
		return errControlLine
	}
	var f [5][]byte
	fields := splitFields(args, f[:0])
	pa := pubArgs{line: line, headerLen: -1}
	sizes := 1
	if withHeader {
		sizes = 2
	}
	switch len(fields) - sizes {
	case 1:
		pa.subject = fields[0]
	case 2:
		pa.subject, pa.reply = fields[0], fields[1]
	default:
		return errProtocol
	}
	pa.size = parseSize(fields[len(fields)-1])
	if withHeader {
		pa.headerLen = parseSize(fields[len(fields)-2])
		if pa.headerLen < 0 || pa.size < 0 || pa.headerLen > pa.size {
			return errProtocol
		}
	}
	if pa.size < 0 {
		return errProtocol
	}
	p.pub = pa
	if err := h.pubArgs(&p.pub); err != nil {
		return err
	}
	p.inPayload = true
	return nil
}

// repoint moves the argument slices onto a copy of the line.
func (pa *pubArgs) repoint(line []byte) {
	pa.subject = rebase(pa.subject, pa.line, line)
	pa.reply = rebase(pa.reply, pa.line, line)
	pa.line = line
}

// rebase returns the part of to at the offset s has within from (s is a
// subslice of from, which reaches the end of their shared array, so the
// difference of their capacities is the offset).
func rebase(s, from, to []byte) []byte {
	if s == nil {
		return nil
	}
	off := cap(from) - cap(s)
	return to[off : off+len(s)]
}

// splitFields appends the space- or tab-separated fields of args to dst;
// at most cap(dst) fields are taken, one more field than that makes the
// result too long to be valid, which is all callers need to know.
func splitFields(args []byte, dst [][]byte) [][]byte {
	start := -1
	for i, b := range args {
		if isSpace(b) {
			if start >= 0 {
				if len(dst) == cap(dst) {
					return append(dst, nil) // too many
				}
				dst = append(dst, args[start:i])
				start = -1
			}
		} else if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		if len(dst) == cap(dst) {
			return append(dst, nil)
		}
		dst = append(dst, args[start:])
	}
	return dst
}

func isSpace(b byte) bool { return b == ' ' || b == '\t' }

// parseSize reads a decimal size of at most nine digits, as nats-server
// does; anything else is -1.
func parseSize(d []byte) int {
	if len(d) == 0 || len(d) > 9 {
		return -1
	}
	n := 0
	for _, b := range d {
		if b < '0' || b > '9' {
			return -1
		}
		n = n*10 + int(b-'0')
	}
	return n
}

// equalFold compares ASCII b with upper-case word, ignoring b's case.
func equalFold(b []byte, word string) bool {
	for i := range len(word) {
		c := b[i]
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		if c != word[i] {
			return false
		}
	}
	return true
}
