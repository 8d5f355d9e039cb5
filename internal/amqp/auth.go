package amqp

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"net"
	"strings"

	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/netserve"
	"github.com/wharf-mq/wharf/internal/users"
)

// The SASL mechanisms announced in connection.start, in RabbitMQ's order.
// EXTERNAL (the user named by a TLS client certificate, RabbitMQ's
// rabbitmq_auth_mechanism_ssl) is offered on TLS connections only.
const (
	passwordMechanisms = "PLAIN AMQPLAIN"
	mechanismExternal  = "EXTERNAL"
)

// authenticator checks logins against the user store.
type authenticator struct {
	users    *users.Store
	limiter  users.LoginLimiter // nil: no limit
	loopback map[string]bool    // users allowed only from loopback addresses
}

func newAuthenticator(cfg Config) *authenticator {
	a := &authenticator{users: cfg.Users, limiter: cfg.Limiter, loopback: make(map[string]bool)}
	for _, u := range cfg.LoopbackUsers {
		a.loopback[u] = true
	}
	return a
}

// login is one connection.start-ok to check: its mechanism and response,
// the client's address and, on a TLS connection, its state.
type login struct {
	mechanism, response string
	remote              net.Addr
	tls                 *tls.ConnectionState // nil: not TLS
}

// mechanisms lists what connection.start offers a connection.
func mechanisms(overTLS bool) string {
	if overTLS {
		return passwordMechanisms + " " + mechanismExternal
	}
	return passwordMechanisms
}

// authError is why a login failed: the text the client sees and the detail
// for the log (which never holds the password).
type authError struct {
	client *amqpwire.Error
	detail string
}

// authenticate checks a login, returning the user name. A password login
// first waits its turn with the limiter, and the catch-up of a user the
// node does not know ends, until ctx ends: the handshake's deadline.
func (a *authenticator) authenticate(ctx context.Context, l login) (string, *authError) {
	refused := func(detail string) (string, *authError) {
		e := amqpwire.Errorf(amqpwire.CodeAccessRefused,
			"Login was refused using authentication mechanism %s. For details see the broker logfile.", l.mechanism)
		e.Hard = true
		return "", &authError{client: e, detail: detail}
	}
	var user string
	switch {
	case l.mechanism == "PLAIN" || l.mechanism == "AMQPLAIN":
		parse := parsePlain
		if l.mechanism == "AMQPLAIN" {
			parse = parseAMQPlain
		}
		name, pass, ok := parse(l.response)
		if !ok {
			return refused("malformed " + l.mechanism + " response")
		}
		_, ok, err := a.users.Login(ctx, a.limiter, l.remote.String(), name, pass)
		if err != nil {
			return refused("gave up waiting after failed logins from this address: " + err.Error())
		}
		if !ok {
			return refused("invalid credentials for user '" + name + "'")
		}
		user = name
	case l.mechanism == mechanismExternal && l.tls != nil:
		name, problem := certificateUser(l.tls)
		if problem != "" {
			return refused(problem)
		}
		if _, ok := a.users.GetContext(ctx, name); !ok {
			return refused("user '" + name + "' of the client certificate does not exist")
		}
		user = name
	default:
		// RabbitMQ closes with 503 for a mechanism it did not offer.
		e := amqpwire.Errorf(amqpwire.CodeCommandInvalid, "unknown authentication mechanism '%s'", l.mechanism)
		return "", &authError{client: e, detail: "unknown mechanism"}
	}
	// Anything but a loopback TCP peer is refused, an in-memory pipe
	// included: the check fails closed (netserve.FromLoopback).
	if a.loopback[user] && !netserve.FromLoopback(l.remote.String()) {
		e := amqpwire.Errorf(amqpwire.CodeAccessRefused, "User '%s' can only connect via localhost", user)
		e.Hard = true
		return "", &authError{client: e, detail: "user '" + user + "' may only connect via localhost"}
	}
	return user, nil
}

// certificateUser is the user a verified client certificate names: its
// subject's common name. A certificate the handshake did not verify
// against --tls-client-ca names nobody.
func certificateUser(st *tls.ConnectionState) (user, problem string) {
	if len(st.PeerCertificates) == 0 {
		return "", "connection peer presented no TLS (x.509) certificate"
	}
	if len(st.VerifiedChains) == 0 {
		return "", "the client certificate was not verified (no --tls-client-ca)"
	}
	cn := st.PeerCertificates[0].Subject.CommonName
	if cn == "" {
		return "", "the client certificate has no common name"
	}
	return cn, ""
}

// parsePlain splits a SASL PLAIN response: [authzid] NUL authcid NUL passwd.
func parsePlain(resp string) (user, pass string, ok bool) {
	parts := strings.Split(resp, "\x00")
	if len(parts) != 3 {
		return "", "", false
	}
	return parts[1], parts[2], true
}

// parseAMQPlain reads an AMQPLAIN response: a field table without its
// length prefix, holding LOGIN and PASSWORD.
func parseAMQPlain(resp string) (user, pass string, ok bool) {
	buf := make([]byte, 4+len(resp))
	binary.BigEndian.PutUint32(buf, uint32(len(resp)))
	copy(buf[4:], resp)
	t, _, err := amqpwire.ReadTable(buf)
	if err != nil {
		return "", "", false
	}
	user, ok1 := t["LOGIN"].(string)
	pass, ok2 := t["PASSWORD"].(string)
	return user, pass, ok1 && ok2
}
