package nats

// closeError ends a connection. reply, when not empty, is the -ERR text
// nats-server sends before closing; without one the connection is closed
// without a word, as nats-server does for malformed arguments.
type closeError struct{ reply string }

func (e *closeError) Error() string {
	if e.reply == "" {
		return "protocol violation"
	}
	return e.reply
}

// The ways a client's input ends its connection, with nats-server's texts.
var (
	// errUnknownOp: a line that is no client operation, or a payload
	// not followed by CRLF.
	errUnknownOp = &closeError{"Unknown Protocol Operation"}
	// errControlLine: a protocol line longer than MaxControlLine.
	errControlLine = &closeError{"maximum control line exceeded"}
	// errProtocol: malformed arguments of a known operation (a wrong
	// count, a size that is no number, a header longer than its
	// message, HPUB without headers, CONNECT that is not JSON).
	errProtocol = &closeError{}
)

// Errors the connection's handlers close it with.
var (
	errAuthViolation  = &closeError{"Authorization Violation"}
	errAuthTimeout    = &closeError{"Authentication Timeout"}
	errMaxPayload     = &closeError{"Maximum Payload Violation"}
	errBadProtocol    = &closeError{"invalid client protocol"}
	errNoRespondersHd = &closeError{"no responders requires headers support"}
	errStale          = &closeError{"Stale Connection"}
)

// Errors a connection survives.
const (
	errInvalidSubject        = "Invalid Subject"
	errInvalidPublishSubject = "Invalid Publish Subject"
)

// errLine is the wire form of an -ERR.
func errLine(text string) []byte { return []byte("-ERR '" + text + "'\r\n") }
