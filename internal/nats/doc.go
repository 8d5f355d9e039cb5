// Package nats is Wharf's NATS front end: the client protocol of
// nats-server 2.x (INFO, CONNECT, PUB, HPUB, SUB, UNSUB, MSG, HMSG, PING,
// PONG, +OK, -ERR) over the subject router of internal/subjects, and
// JetStream's API over the JetStream core (internal/jetstream). Core NATS
// keeps no messages: it is at-most-once, a message goes to the
// subscribers connected when it is published. JetStream is a set of
// subscriptions in the same router (JetStream): the $JS.API.> requests,
// the acknowledgements on $JS.ACK.>, and each stream's subjects, whose
// messages the core stores; it needs no connection of its own, and what
// the core delivers is routed to deliver subjects and inboxes like any
// message, showing the stored message's own subject.
//
// Behaviour is nats-server 2.15's, texts included, wherever a client can
// tell: CONNECT defaults (verbose, pedantic and echo on until a CONNECT
// says otherwise), +OK in verbose mode, pedantic subject checks, the INFO
// that follows the first PONG, max_payload, queue groups, auto-unsubscribe
// after max messages, headers stripped for clients that did not ask for
// them, the 503 no-responders status, user/password and token
// authentication, stale-connection PINGs.
//
// Memory is bounded per connection: a client's pending output may reach
// Config.MaxPending; past it the client is a slow consumer and is cut off,
// its backlog dropped, as nats-server does. Publishers to a client nearing
// the bound wait a few milliseconds for it first (nats-server's fast
// producer stall).
//
// Where things are:
//
//	server.go   listeners and connection tracking (internal/netserve), INFO
//	config.go   limits and their nats-server defaults
//	parser.go   the protocol parser: a state machine over each read buffer
//	conn.go     one connection: reader loop, CONNECT, PING, closing
//	pubsub.go   SUB, UNSUB, PUB and delivery (the router's Sink)
//	outbound.go the bytes waiting for a client, and its slow-consumer bound
//	chunks.go   the pooled chunks those bytes are kept in
//	writer.go   the connection's writer goroutine, pings, auth timeout
//	auth.go     user/password and token checks
//	info.go     INFO and CONNECT as JSON
//	errors.go   the -ERR texts
//
//	jetstream.go           the JetStream front end: its subscriptions, the core's Outbox, publish acks
//	jetstream_api.go       $JS.API.> requests: account, streams, messages, direct get
//	jetstream_consumers.go consumer requests and pull requests
//	jetstream_acks.go      acknowledgements
//
// Goroutines: per connection a reader (serving it) and a writer, which the
// reader starts and waits for. The Server owns both through netserve and
// Shutdown waits for every one.
//
// The hot path: a reader parses a whole read buffer in place, routes each
// PUB through its own cache of router results (no lock) and appends the
// MSG to each subscriber's outbound buffer; the subscribers' writers are
// woken once per read, so a burst of small messages leaves in few writes.
package nats
