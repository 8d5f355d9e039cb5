package nats

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/wharf-mq/wharf/internal/jetstream"
	"github.com/wharf-mq/wharf/internal/subjects"
)

// ackSink takes every message to $JS.ACK.>: acknowledgements of
// deliveries, sent to their reply subjects
// $JS.ACK.<stream>.<consumer>.<delivery count>.<stream seq>.<consumer
// seq>.<time>.<pending>.
type ackSink struct{ js *JetStream }

// The acknowledgement bodies, nats-server's.
var (
	ackAck      = []byte("+ACK")
	ackOK       = []byte("+OK")
	ackNak      = []byte("-NAK")
	ackProgress = []byte("+WPI")
	ackNext     = []byte("+NXT")
	ackTerm     = []byte("+TERM")
)

func (a ackSink) Deliver(m *subjects.Message) bool {
	tok := strings.Split(string(m.Subject), ".")
	if len(tok) != 9 {
		return true // not a delivery's reply subject (or the v2 form with a domain, which Wharf does not hand out)
	}
	sseq, err1 := strconv.ParseUint(tok[5], 10, 64)
	dseq, err2 := strconv.ParseUint(tok[6], 10, 64)
	if err1 != nil || err2 != nil {
		return true
	}
	stream, consumer, reply := tok[2], tok[3], string(m.Reply)
	body := bytes.TrimSpace(m.Payload)
	kind, delay := jetstream.AckAck, time.Duration(0)
	switch {
	case len(body) == 0, bytes.Equal(body, ackAck), bytes.Equal(body, ackOK):
	case bytes.HasPrefix(body, ackNak):
		kind, delay = jetstream.AckNak, nakDelay(body[len(ackNak):])
	case bytes.Equal(body, ackProgress):
		kind = jetstream.AckProgress
	case bytes.HasPrefix(body, ackTerm):
		kind = jetstream.AckTerm
	case bytes.HasPrefix(body, ackNext):
		// Acknowledge, then take the rest as a pull request whose
		// messages go to the acknowledgement's reply subject.
		a.js.core.Ack(stream, consumer, sseq, dseq, jetstream.AckAck, 0)
		if req, err := parseNext(body[len(ackNext):]); err == nil && reply != "" {
			a.js.core.Next(stream, consumer, reply, req)
		}
		return true
	default:
		kind = jetstream.AckUnknown
	}
	if !a.js.core.Ack(stream, consumer, sseq, dseq, kind, delay) {
		return true
	}
	if reply != "" {
		// A synchronous acknowledgement (AckSync) waits for this empty
		// answer, sent once the acknowledgement is applied.
		a.js.router.Match([]byte(reply)).Deliver(&subjects.Message{Subject: []byte(reply), Source: a.js})
	}
	return true
}

// nakDelay reads a -NAK's delay: {"delay": nanoseconds} or a Go duration;
// anything else is an ordinary -NAK, as in nats-server.
func nakDelay(arg []byte) time.Duration {
	arg = bytes.TrimSpace(arg)
	if len(arg) == 0 {
		return 0
	}
	if arg[0] == '{' {
		var opt struct {
			Delay time.Duration `json:"delay"`
		}
		if json.Unmarshal(arg, &opt) == nil {
			return opt.Delay
		}
		return 0
	}
	d, _ := time.ParseDuration(string(arg))
	return d
}
