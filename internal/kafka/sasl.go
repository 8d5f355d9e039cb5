package kafka

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/wharf-mq/wharf/internal/netserve"
	"github.com/wharf-mq/wharf/internal/users"
)

// mechanismPlain is SASL PLAIN (RFC 4616).
const mechanismPlain = "PLAIN"

// saslMechanisms are what a SASL listener offers, as SaslHandshake lists
// them.
var saslMechanisms = []string{mechanismPlain, string(users.ScramSHA256), string(users.ScramSHA512)}

// loopbackOnlyUser may log in from loopback addresses only, as RabbitMQ's
// guest (users.Bootstrap creates it on a new node for every protocol).
const loopbackOnlyUser = "guest"

// userLookupWait bounds how long a login, or a description of a user's
// SCRAM credentials, waits for the cluster when this node does not know
// the user or its credential (the catch-up of a miss: users.Store). On a
// node cut off from the metadata quorum that wait would be the metadata
// write timeout (30 s), past franz-go's SASL timeout (it gives up at
// 20 s, with an i/o timeout) and racing Java's request.timeout.ms (30 s),
// so the client would never see SASL_AUTHENTICATION_FAILED. 5 s is well
// inside every client's timeout and several Raft election timeouts (1 s)
// long, so a catch-up through a quorum that is there, electing a leader
// or not, still finds a user made elsewhere just now. A user the node
// knows never waits: Kafka answers from its local metadata cache at once.
const userLookupWait = 5 * time.Second

// saslFailure is a failed authentication: what the client is told (Kafka's
// texts, which never say whether the user exists) and, for the log, why.
type saslFailure struct {
	clientMessage string
	reason        error
}

func (f *saslFailure) Error() string { return f.clientMessage + ": " + f.reason.Error() }

// Kafka's answers to a failed authentication.
const (
	plainInvalidMessage = "Authentication failed: Invalid username or password"
	authzidMessage      = "Authentication failed: Client requested an authorization id that is different from username"
)

// invalidCredentials is Kafka's answer when a SASL server fails without a
// message of its own to give (every SCRAM failure).
func (c *conn) invalidCredentials(reason error) *saslFailure {
	during := "authentication"
	if c.auth.reauthenticating {
		during = "re-authentication"
	}
	return &saslFailure{
		clientMessage: fmt.Sprintf("Authentication failed during %s due to invalid credentials with SASL mechanism %s", during, c.auth.mechanism),
		reason:        reason,
	}
}

// saslStep feeds the client's next token to the exchange the handshake
// started and returns the server's answer; done reports a successful
// authentication, after which the connection runs as the user. A
// *saslFailure error means authentication failed and the connection must
// close after telling the client.
func (c *conn) saslStep(token []byte) (answer []byte, done bool, err error) {
	first := c.auth.scram == nil
	if first {
		// Every attempt waits its turn when its address has been
		// failing (authlimit).
		if err := c.s.cfg.LoginLimiter.Wait(c.s.shutdownCtx, c.remoteIP); err != nil {
			return nil, false, &saslFailure{clientMessage: "Authentication failed: the broker is shutting down", reason: err}
		}
	}
	ctx, cancel := context.WithTimeout(c.s.shutdownCtx, c.s.userLookupWait)
	defer cancel()
	var user string
	switch c.auth.mechanism {
	case mechanismPlain:
		user, err = c.checkPlain(ctx, token)
		done = err == nil
	default:
		if first {
			if c.s.cfg.Users == nil {
				return nil, false, c.invalidCredentials(errors.New("no user store"))
			}
			if c.auth.scram, err = c.s.cfg.Users.NewScramExchange(users.Mechanism(c.auth.mechanism)); err != nil {
				return nil, false, c.invalidCredentials(err)
			}
		}
		answer, done, err = c.auth.scram.Step(ctx, token)
		user = c.auth.scram.User()
		if errors.Is(err, users.ErrAuthzid) {
			err = &saslFailure{clientMessage: authzidMessage, reason: err}
		} else if err != nil {
			err = c.invalidCredentials(err)
		}
	}
	if err == nil && done {
		err = c.checkNewPrincipal(user)
	}
	switch {
	case err != nil:
		c.failedLogin(user, err)
		return nil, false, err
	case done:
		c.loggedIn(user)
	}
	return answer, done, nil
}

// checkPlain checks a PLAIN token and returns the user it names; the
// catch-up of a miss ends with ctx.
func (c *conn) checkPlain(ctx context.Context, token []byte) (string, error) {
	authzid, user, password, err := users.ParsePlain(token)
	switch {
	case err != nil:
		return "", &saslFailure{clientMessage: "Authentication failed: Invalid SASL/PLAIN response", reason: err}
	case user == "":
		return "", &saslFailure{clientMessage: "Authentication failed: username not specified", reason: errors.New("empty user name")}
	case password == "":
		return user, &saslFailure{clientMessage: "Authentication failed: password not specified", reason: errors.New("empty password")}
	case c.s.cfg.Users == nil:
		return user, &saslFailure{clientMessage: plainInvalidMessage, reason: errors.New("no user store")}
	}
	if _, ok := c.s.cfg.Users.AuthenticateContext(ctx, user, password); !ok {
		return user, &saslFailure{clientMessage: plainInvalidMessage, reason: users.ErrBadCredentials}
	}
	if authzid != "" && authzid != user {
		return user, &saslFailure{clientMessage: authzidMessage, reason: users.ErrAuthzid}
	}
	return user, nil
}

// checkNewPrincipal refuses what the credentials alone allow but the
// connection does not: guest from another machine, and a
// re-authentication as someone else.
func (c *conn) checkNewPrincipal(user string) error {
	if user == loopbackOnlyUser && !netserve.FromLoopback(c.remote) {
		// Told as a wrong password is: the client learns nothing more.
		reason := errors.New("user guest can only log in from localhost")
		if c.auth.mechanism == mechanismPlain {
			return &saslFailure{clientMessage: plainInvalidMessage, reason: reason}
		}
		return c.invalidCredentials(reason)
	}
	if c.auth.reauthenticating && userPrincipal(user) != c.auth.principal {
		return &saslFailure{
			clientMessage: fmt.Sprintf("Cannot change principals during re-authentication from %s: %s",
				principalDotted(c.auth.principal), principalDotted(userPrincipal(user))),
			reason: errors.New("re-authentication as another user"),
		}
	}
	return nil
}

// principalDotted writes "User:alice" as Kafka's re-authentication error
// does, "User.alice".
func principalDotted(p string) string {
	return strings.Replace(p, ":", ".", 1)
}

// loggedIn makes the connection run as user from now on.
func (c *conn) loggedIn(user string) {
	c.s.cfg.LoginLimiter.Succeeded(c.remoteIP)
	event := "authenticated"
	if c.auth.reauthenticating {
		event = "re-authenticated"
	}
	c.log.Debug(event, "listener", c.listener.Name(), "mechanism", c.auth.mechanism, "user", user)
	c.auth.principal = userPrincipal(user)
	c.auth.lastMechanism = c.auth.mechanism
	c.auth.mechanism, c.auth.rawTokens, c.auth.scram, c.auth.reauthenticating = "", false, nil, false
	c.auth.expires = 0
	if lifetime := c.s.cfg.SASLSessionLifetime; lifetime > 0 {
		c.auth.expires = monoNow() + int64(lifetime)
	}
}

// failedLogin logs a failed authentication, without the password, and
// counts it against the client's address.
func (c *conn) failedLogin(user string, err error) {
	c.s.cfg.LoginLimiter.Failed(c.remoteIP)
	var f *saslFailure
	reason := err
	if errors.As(err, &f) {
		reason = f.reason
	}
	c.log.Info("failed authentication", "listener", c.listener.Name(), "mechanism", c.auth.mechanism,
		"user", user, "reauthentication", c.auth.reauthenticating, "reason", reason.Error())
}

// sessionLifetimeMillis is what a successful SaslAuthenticate v1+ tells
// the client: how long until it must re-authenticate (0: never).
func (s *Server) sessionLifetimeMillis() int64 { return s.cfg.SASLSessionLifetime.Milliseconds() }
