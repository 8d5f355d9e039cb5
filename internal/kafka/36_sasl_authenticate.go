package kafka

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SaslAuthenticate (key 36), v0-v2.
//
// Carries one token of the exchange SaslHandshake v1 started. A failed
// authentication is SASL_AUTHENTICATION_FAILED with Kafka's message
// ("Authentication failed: Invalid username or password" for PLAIN), and
// the connection closes once it is written. Success on v1+ tells the
// client how long its session lasts (--kafka-sasl-session-lifetime,
// Kafka's connections.max.reauth.ms; 0: forever). Without an exchange
// under way it is ILLEGAL_SASL_STATE, as in Kafka.

func (c *conn) handleSaslAuthenticate(req *kmsg.SASLAuthenticateRequest) (*response, error) {
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	if !c.listener.Protocol.SASL() || c.auth.mechanism == "" {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		resp.ErrorMessage = kmsg.StringPtr("SaslAuthenticate request received after successful authentication")
		return &response{msg: resp}, nil
	}
	if req.Version > 0 {
		c.auth.canReauthenticate = true
	}
	answer, done, err := c.saslStep(req.SASLAuthBytes)
	var failure *saslFailure
	if errors.As(err, &failure) {
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		resp.ErrorMessage = &failure.clientMessage
		return &response{msg: resp, closeConn: true}, nil
	}
	if err != nil {
		return nil, err
	}
	resp.SASLAuthBytes = answer
	if done {
		resp.SessionLifetimeMillis = c.s.sessionLifetimeMillis()
	}
	return &response{msg: resp}, nil
}
