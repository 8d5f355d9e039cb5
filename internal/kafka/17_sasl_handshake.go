package kafka

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SaslHandshake (key 17), v0-v1.
//
// On a SASL listener it chooses the mechanism of the authentication that
// follows: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (anything else is
// UNSUPPORTED_SASL_MECHANISM, and the connection closes, as in Kafka). v1
// carries the tokens in SaslAuthenticate requests; v0, as old clients
// use it, in bare size-prefixed frames (rawSASLToken). On an
// authenticated connection whose client used SaslAuthenticate v1+, it
// starts a re-authentication (KIP-368) with the same mechanism. Anywhere
// else (a listener without SASL, or a client that cannot re-authenticate)
// it is ILLEGAL_SASL_STATE, as Kafka's request handler answers.

func (c *conn) handleSaslHandshake(req *kmsg.SASLHandshakeRequest) (*response, error) {
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	if !c.listener.Protocol.SASL() || c.authenticated() && !c.auth.canReauthenticate {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return &response{msg: resp}, nil
	}
	resp.SupportedMechanisms = saslMechanisms
	mechanism := req.Mechanism
	supported := slices.Contains(saslMechanisms, mechanism)
	if c.authenticated() && mechanism != c.auth.lastMechanism {
		supported = false // a re-authentication keeps its mechanism
	}
	if !supported {
		c.log.Info("failed authentication: unsupported SASL mechanism", "listener", c.listener.Name(),
			"mechanism", mechanism, "reauthentication", c.authenticated())
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		return &response{msg: resp, closeConn: true}, nil
	}
	c.auth.mechanism = mechanism
	c.auth.rawTokens = req.Version == 0
	c.auth.reauthenticating = c.authenticated()
	return &response{msg: resp}, nil
}

// rawSASLToken handles a SASL token sent, after a v0 handshake, as a bare
// frame, and answers with a bare frame; a failure closes the connection
// without an answer, the only way such a client learns of it.
func (c *conn) rawSASLToken(token []byte) (*response, bool) {
	answer, _, err := c.saslStep(token)
	if err != nil {
		return nil, false
	}
	if answer == nil {
		answer = []byte{}
	}
	return &response{raw: answer}, true
}
