package nats

import (
	"encoding/json"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/wharf-mq/wharf/internal/jetstream"
	"github.com/wharf-mq/wharf/internal/subjects"
)

// JetStream is the JetStream front end: it holds interest in the router
// for the JSON API ($JS.API.>), the acknowledgements ($JS.ACK.>) and each
// stream's subjects, turns what arrives there into calls on the
// JetStream core (internal/jetstream), and is the core's Outbox, routing
// what it delivers to the subscribers of deliver subjects and inboxes.
// It needs no connection of its own: requests arrive as messages
// published through the router, whoever published them.
type JetStream struct {
	router *subjects.Router
	core   *jetstream.Service
	log    *slog.Logger

	api, acks *subjects.Subscription

	mu      sync.Mutex
	streams map[string]*streamCapture // by stream name
	closed  bool

	// loopback holds the API requests the core itself sent, which the
	// loopback goroutine serves (see apiSink.Deliver); stop ends it and
	// loopDone says it has.
	loopback chan apiRequest
	stop     chan struct{}
	loopDone chan struct{}

	requests, errors atomic.Uint64 // API requests answered, and with an error
}

// NewJetStream serves core's JetStream API through router. The caller then
// starts core with the front end as its Outbox and observer:
//
//	core.Start(js, js.StreamChanged)
func NewJetStream(router *subjects.Router, core *jetstream.Service, logger *slog.Logger) (*JetStream, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	js := &JetStream{router: router, core: core, log: logger.With("component", "nats"), streams: map[string]*streamCapture{},
		loopback: make(chan apiRequest, loopbackQueue), stop: make(chan struct{}), loopDone: make(chan struct{})}
	var err error
	if js.api, err = router.Subscribe("$JS.API.>", "", apiSink{js}); err != nil {
		return nil, err
	}
	if js.acks, err = router.Subscribe("$JS.ACK.>", "", ackSink{js}); err != nil {
		router.Unsubscribe(js.api)
		return nil, err
	}
	go js.serveLoopback()
	return js, nil
}

// Close removes the front end's interest from the router: the API and
// the streams' subjects go unanswered.
func (js *JetStream) Close() {
	js.mu.Lock()
	js.closed = true
	captures := js.streams
	js.streams = nil
	js.mu.Unlock()
	js.router.Unsubscribe(js.api)
	js.router.Unsubscribe(js.acks)
	for _, c := range captures {
		c.unsubscribe(js.router)
	}
	close(js.stop)
	<-js.loopDone
}

// Send routes m to the subscribers of to, who see m.Subject (a stored
// message's subject, not the inbox or deliver subject it travels on), as
// nats-server delivers JetStream messages.
func (js *JetStream) Send(to string, m *jetstream.OutMessage) bool {
	return js.router.Match([]byte(to)).Deliver(&subjects.Message{
		Subject: []byte(m.Subject),
		Reply:   []byte(m.Reply),
		Header:  m.Header,
		Payload: m.Data,
		Source:  js,
	})
}

// Interest reports whether anyone subscribes to subject.
func (js *JetStream) Interest(subject string) bool {
	return !js.router.Match([]byte(subject)).Empty()
}

// StreamChanged keeps the subscriptions of a stream (its subjects, and
// direct gets if it allows them) in step with its configuration; cfg nil
// removes them.
func (js *JetStream) StreamChanged(name string, cfg *jetstream.StreamConfig) {
	js.mu.Lock()
	defer js.mu.Unlock()
	if js.closed {
		return
	}
	if old := js.streams[name]; old != nil {
		old.unsubscribe(js.router)
		delete(js.streams, name)
	}
	if cfg == nil {
		return
	}
	c := &streamCapture{js: js, name: name, allowDirect: cfg.AllowDirect}
	for _, subj := range cfg.Subjects {
		// One queue group per stream, with a name no client can give
		// (a space), so that a message two of its patterns match is
		// stored once.
		sub, err := js.router.Subscribe(subj, "jetstream "+name, c)
		if err != nil {
			js.log.Error("jetstream: stream subject not subscribed", "stream", name, "subject", subj, "err", err)
			continue
		}
		c.subs = append(c.subs, sub)
	}
	js.streams[name] = c
}

// allowsDirect reports whether a stream answers direct gets.
func (js *JetStream) allowsDirect(stream string) bool {
	js.mu.Lock()
	defer js.mu.Unlock()
	c := js.streams[stream]
	return c != nil && c.allowDirect
}

// streamCapture is a stream's interest in its subjects: every message
// published to them is stored, and acknowledged on its reply subject once
// fsynced.
type streamCapture struct {
	js          *JetStream
	name        string
	allowDirect bool
	subs        []*subjects.Subscription
}

func (c *streamCapture) unsubscribe(r *subjects.Router) {
	for _, s := range c.subs {
		r.Unsubscribe(s)
	}
}

// Deliver stores a message published to the stream's subjects. The
// message's slices are the publisher's: the core copies what it keeps
// before Publish returns.
func (c *streamCapture) Deliver(m *subjects.Message) bool {
	var done func(jetstream.PubAck, *jetstream.APIError)
	if len(m.Reply) > 0 {
		reply := string(m.Reply)
		done = func(ack jetstream.PubAck, err *jetstream.APIError) {
			c.js.reply(reply, pubAckResponse{PubAck: ack, Error: err})
		}
	}
	c.js.core.Publish(c.name, string(m.Subject), m.Header, m.Payload, done)
	return true
}

// pubAckResponse is a publish's acknowledgement, or its error with the
// stream's name and sequence 0, as nats-server sends them.
type pubAckResponse struct {
	Error *jetstream.APIError `json:"error,omitempty"`
	jetstream.PubAck
}

func (r pubAckResponse) MarshalJSON() ([]byte, error) {
	type plain pubAckResponse
	if r.Error != nil {
		return json.Marshal(struct {
			Error  *jetstream.APIError `json:"error"`
			Stream string              `json:"stream"`
			Seq    uint64              `json:"seq"`
		}{r.Error, r.Stream, 0})
	}
	return json.Marshal(plain(r))
}

// reply sends v as JSON to a reply subject.
func (js *JetStream) reply(to string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		js.log.Error("jetstream: encode a response", "err", err)
		return
	}
	js.router.Match([]byte(to)).Deliver(&subjects.Message{Subject: []byte(to), Payload: b, Source: js})
}
