package amqp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"runtime"
	"time"

	"github.com/wharf-mq/wharf/internal/access"
	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// serverProperties are announced in connection.start. Clients read product
// and the capabilities.
func (s *Server) serverProperties() amqpwire.Table {
	return amqpwire.Table{
		"product":     "Wharf",
		"version":     s.cfg.Version,
		"platform":    "Go " + runtime.Version(),
		"copyright":   "The Wharf authors",
		"information": "https://github.com/wharf-mq/wharf",
		"capabilities": amqpwire.Table{
			"publisher_confirms":           true,
			"exchange_exchange_bindings":   true,
			"basic.nack":                   true,
			"consumer_cancel_notify":       true,
			"connection.blocked":           true,
			"consumer_priorities":          true,
			"authentication_failure_close": true,
			"per_consumer_qos":             true,
			"direct_reply_to":              true,
		},
	}
}

// handshake runs the negotiation from the protocol header to
// connection.open-ok, with the whole of it bounded by HandshakeTimeout.
// On success the writer goroutine runs and open-ok is queued. On failure
// whatever the client should hear has been written.
func (c *conn) handshake() error {
	cfg := &c.srv.cfg
	deadline := time.Now().Add(cfg.HandshakeTimeout)
	c.nc.SetReadDeadline(deadline)

	if err := amqpwire.ReadProtocolHeader(c.br); err != nil {
		var he *amqpwire.ProtocolHeaderError
		if errors.As(err, &he) {
			// Spec 4.2.2: answer with the header we speak, then close.
			c.nc.Write([]byte(amqpwire.ProtocolHeader))
		}
		return err
	}
	c.fr = amqpwire.NewFrameReader(c.br, amqpwire.FrameMinSize)
	c.tls = tlsState(c.nc) // reading the header did the TLS handshake

	// connection.start / start-ok
	start := &amqpwire.ConnectionStart{
		VersionMajor:     amqpwire.VersionMajor,
		VersionMinor:     amqpwire.VersionMinor,
		ServerProperties: c.srv.serverProperties(),
		Mechanisms:       mechanisms(c.tls != nil),
		Locales:          "en_US",
	}
	if err := c.writeNow(start); err != nil {
		return err
	}
	m, err := c.expectMethod("starting", amqpwire.ConnectionStartOKID)
	if err != nil {
		return err
	}
	startOK := m.(*amqpwire.ConnectionStartOK)
	c.caps = capabilitiesOf(startOK.ClientProperties)
	c.clientProps, c.mechanism = startOK.ClientProperties, startOK.Mechanism
	loginCtx, cancel := context.WithDeadline(c.srv.stopped, deadline)
	user, aerr := c.srv.auth.authenticate(loginCtx, login{mechanism: startOK.Mechanism, response: startOK.Response,
		remote: c.nc.RemoteAddr(), tls: c.tls})
	cancel()
	if aerr != nil {
		c.log.Warn("authentication failed", "mechanism", startOK.Mechanism, "reason", aerr.detail)
		if aerr.client.Code == amqpwire.CodeAccessRefused && !c.caps.authFailure {
			// Without authentication_failure_close a client expects the
			// socket to be closed, nothing more.
			return errors.New("authentication failed: " + aerr.detail)
		}
		return c.failHandshake(aerr.client.In(amqpwire.ConnectionStartOKID))
	}
	c.user = user

	// connection.tune / tune-ok
	tune := &amqpwire.ConnectionTune{ChannelMax: cfg.ChannelMax, FrameMax: cfg.FrameMax, Heartbeat: cfg.heartbeatSeconds()}
	if err := c.writeNow(tune); err != nil {
		return err
	}
	m, err = c.expectMethod("tuning", amqpwire.ConnectionTuneOKID)
	if err != nil {
		return err
	}
	if e := c.applyTuneOK(m.(*amqpwire.ConnectionTuneOK)); e != nil {
		return c.failHandshake(e.In(amqpwire.ConnectionTuneOKID))
	}

	// connection.open / open-ok
	m, err = c.expectMethod("opening", amqpwire.ConnectionOpenID)
	if err != nil {
		return err
	}
	open := m.(*amqpwire.ConnectionOpen)
	// As RabbitMQ's check_vhost_access: a vhost that does not exist and
	// one the user has no permission in get the same refusal. Both
	// lookups catch up with the cluster on a miss (catchup.go,
	// access.Store.HasVHostAccessContext), by the handshake's deadline: a
	// vhost made and a permission given through another node just now
	// let the client in here too.
	vh, verr := c.srv.lookUpVHost(open.VirtualHost, deadline)
	openCtx, cancel := context.WithDeadline(c.srv.stopped, deadline)
	allowed := verr == nil && cfg.Access.HasVHostAccessContext(openCtx, user, open.VirtualHost)
	cancel()
	if !allowed {
		return c.failHandshake(access.VHostRefused(open.VirtualHost, user).In(amqpwire.ConnectionOpenID))
	}
	c.vhost, c.vhostName = vh, open.VirtualHost
	c.access = cfg.Access.Principal(user, open.VirtualHost)

	c.nc.SetReadDeadline(time.Time{})
	c.releaseWriter() // everything written was flushed; the writer goroutine borrows its own
	c.startWriter()
	c.out.method(0, &amqpwire.ConnectionOpenOK{})
	// From here Shutdown sends connection.close rather than dropping the
	// socket; the read loop notices its request.
	c.opened.Store(true)
	return nil
}

// applyTuneOK checks the client's choices against ours and adopts them.
// A zero channel_max or frame_max means "no limit", i.e. ours.
func (c *conn) applyTuneOK(t *amqpwire.ConnectionTuneOK) *amqpwire.Error {
	cfg := &c.srv.cfg
	channelMax, frameMax := t.ChannelMax, t.FrameMax
	if channelMax == 0 {
		channelMax = cfg.ChannelMax
	}
	if frameMax == 0 {
		frameMax = cfg.FrameMax
	}
	switch {
	case channelMax > cfg.ChannelMax:
		return amqpwire.Errorf(amqpwire.CodeNotAllowed, "negotiated channel_max = %d is higher than the maximum allowed value (%d)",
			channelMax, cfg.ChannelMax)
	case frameMax < amqpwire.FrameMinSize:
		return amqpwire.Errorf(amqpwire.CodeNotAllowed, "frame_max=%d < %d min size", frameMax, amqpwire.FrameMinSize)
	case frameMax > cfg.FrameMax:
		return amqpwire.Errorf(amqpwire.CodeNotAllowed, "frame_max=%d > %d max size", frameMax, cfg.FrameMax)
	}
	c.channelMax, c.frameMax = channelMax, frameMax
	c.heartbeat = time.Duration(t.Heartbeat) * time.Second
	c.fr.SetFrameMax(frameMax)
	c.writer().SetFrameMax(frameMax)
	return nil
}

// expectMethod reads the next method of the handshake, which must be want
// on channel 0. Heartbeats are skipped; connection.close is answered.
func (c *conn) expectMethod(state string, want amqpwire.MethodID) (amqpwire.Method, error) {
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			var we *amqpwire.Error
			if errors.As(err, &we) {
				return nil, c.failHandshake(we)
			}
			return nil, err
		}
		if f.Type == amqpwire.FrameHeartbeat {
			continue
		}
		if f.Type != amqpwire.FrameMethod || f.Channel != 0 {
			return nil, c.failHandshake(amqpwire.Errorf(amqpwire.CodeUnexpectedFrame,
				"expected %s on channel 0 in connection state %s, got a %s frame on channel %d",
				want, state, f.Type, f.Channel))
		}
		m, err := amqpwire.DecodeMethod(f.Payload)
		if err != nil {
			var we *amqpwire.Error
			if errors.As(err, &we) {
				return nil, c.failHandshake(we)
			}
			return nil, err
		}
		switch m.ID() {
		case want:
			return m, nil
		case amqpwire.ConnectionCloseID:
			c.writeNow(&amqpwire.ConnectionCloseOK{})
			return nil, errClientClosed
		}
		return nil, c.failHandshake(amqpwire.Errorf(amqpwire.CodeChannelError,
			"unexpected method in connection state %s: %s", state, m.Name()).In(m.ID()))
	}
}

// failHandshake sends connection.close for e, waits briefly for close-ok
// and returns e.
func (c *conn) failHandshake(e *amqpwire.Error) error {
	if !e.Hard {
		e = &amqpwire.Error{Code: e.Code, Text: e.Text, ClassID: e.ClassID, MethodID: e.MethodID, Hard: true}
	}
	if err := c.writeNow(e.CloseMethod()); err != nil {
		return err
	}
	c.nc.SetReadDeadline(time.Now().Add(time.Second))
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			break
		}
		if f.Type == amqpwire.FrameMethod && f.Channel == 0 {
			if id, _ := amqpwire.PeekMethodID(f.Payload); id == amqpwire.ConnectionCloseOKID || id == amqpwire.ConnectionCloseID {
				break
			}
		}
	}
	return e
}

// writeNow writes and flushes a method on channel 0 from the reader; only
// used before the writer goroutine starts.
func (c *conn) writeNow(m amqpwire.Method) error {
	w := c.writer()
	if err := w.WriteMethod(0, m); err != nil {
		return fmt.Errorf("write %s: %w", m.Name(), err)
	}
	return w.Flush()
}

// capabilitiesOf reads the client's capabilities table.
func capabilitiesOf(props amqpwire.Table) clientCaps {
	caps, _ := props["capabilities"].(amqpwire.Table)
	yes := func(name string) bool { v, _ := caps[name].(bool); return v }
	return clientCaps{
		blocked:      yes("connection.blocked"),
		cancelNotify: yes("consumer_cancel_notify"),
		authFailure:  yes("authentication_failure_close"),
	}
}

// tlsState is a connection's TLS state once its handshake is done (the
// first read does it), or nil for a plain TCP connection.
func tlsState(nc net.Conn) *tls.ConnectionState {
	tc, ok := nc.(*tls.Conn)
	if !ok {
		return nil
	}
	st := tc.ConnectionState()
	return &st
}
