package kafka

import (
	"crypto/tls"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/users"
)

// Principals are named as Kafka names them: "User:NAME". A connection
// that has not authenticated (a PLAINTEXT listener, or SSL without a
// client certificate) is User:ANONYMOUS; a client certificate makes its
// subject the name, as Kafka's default principal builder does
// ("User:CN=alice,O=Example").
const anonymousPrincipal = "User:ANONYMOUS"

func userPrincipal(name string) string { return "User:" + name }

// authState is how a connection authenticated. It is the reader
// goroutine's only: SASL requests are handled alone, in request order,
// and every request is given the principal current when it was read.
type authState struct {
	// principal is who the connection's requests run as; "" on a SASL
	// listener until the first authentication succeeds.
	principal string

	// The SASL exchange in progress (sasl.go): the mechanism the
	// handshake chose ("" when none is under way), whether the tokens
	// come as bare frames (SaslHandshake v0), and SCRAM's state.
	mechanism string
	rawTokens bool
	scram     *users.ScramExchange
	// reauthenticating is set from a re-authentication's handshake
	// until it ends (KIP-368); the session stays valid meanwhile.
	reauthenticating bool
	// canReauthenticate: the client used SaslAuthenticate v1+, which
	// Kafka takes as support for re-authentication.
	canReauthenticate bool
	// lastMechanism authenticated the session; a re-authentication
	// must use it again.
	lastMechanism string
	// expires is when the session ends (monoNow), 0 for never: past
	// it, a request other than a re-authentication closes the
	// connection (connections.max.reauth.ms).
	expires int64
}

// authenticated reports whether the connection's requests may be served
// (every connection on a listener without SASL is).
func (c *conn) authenticated() bool { return c.auth.principal != "" }

// tlsPrincipal sets the principal of a connection on an SSL listener once
// its handshake is done: the client certificate's subject, or ANONYMOUS
// without one. On SASL_SSL, SASL decides.
func (c *conn) tlsPrincipal(state tls.ConnectionState) {
	if c.listener.Protocol.SASL() {
		return
	}
	if len(state.PeerCertificates) > 0 {
		c.auth.principal = userPrincipal(state.PeerCertificates[0].Subject.String())
	}
}

// newAuthState is a connection's state on accept.
func newAuthState(l *Listener) authState {
	if l.Protocol.SASL() {
		return authState{}
	}
	return authState{principal: anonymousPrincipal}
}

// admitBeforeAuthentication decides, on a SASL listener, whether a
// request may be handled given where the connection is in its
// authentication, as Kafka's SaslServerAuthenticator does: before the
// first authentication only ApiVersions, then SaslHandshake, then
// SaslAuthenticate; once the session has expired, only a
// re-authentication. It returns nil or why the connection must close.
func (c *conn) admitBeforeAuthentication(hdr requestHeader) error {
	if !c.listener.Protocol.SASL() {
		return nil
	}
	key := kmsg.Key(hdr.key)
	if !c.authenticated() {
		switch {
		case key == kmsg.ApiVersions && c.auth.mechanism == "",
			key == kmsg.SASLHandshake && c.auth.mechanism == "",
			key == kmsg.SASLAuthenticate && c.auth.mechanism != "":
			return nil
		}
		return fmt.Errorf("unexpected %s request during SASL authentication", kmsg.NameForKey(hdr.key))
	}
	if c.auth.expires != 0 && monoNow() > c.auth.expires &&
		key != kmsg.SASLHandshake && !(key == kmsg.SASLAuthenticate && c.auth.reauthenticating) {
		return fmt.Errorf("SASL session of %s expired (--kafka-sasl-session-lifetime) without re-authentication", c.auth.principal)
	}
	return nil
}

// maxUnauthenticatedRequest bounds the frames of a SASL listener's
// connection before it authenticates: Kafka's
// sasl.server.max.receive.size default. No request a client needs then
// comes near it; an unauthenticated client cannot make the broker read
// a 100 MiB produce request.
const maxUnauthenticatedRequest = 512 << 10
