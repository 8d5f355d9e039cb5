package amqp

import (
	"crypto/subtle"
	"encoding/binary"
	"net"
	"strings"

	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/netserve"
)

// mechanisms are the SASL mechanisms announced in connection.start, in
// RabbitMQ's order.
const mechanisms = "PLAIN AMQPLAIN"

// userStore checks credentials. Every authenticated user may use every
// vhost: Wharf has no permission model yet.
type userStore struct {
	passwords map[string]string
	loopback  map[string]bool // users allowed only from loopback addresses
}

func newUserStore(users map[string]string, loopbackOnly []string) *userStore {
	s := &userStore{passwords: make(map[string]string, len(users)), loopback: make(map[string]bool)}
	for u, p := range users {
		s.passwords[u] = p
	}
	for _, u := range loopbackOnly {
		s.loopback[u] = true
	}
	return s
}

// authError is why a login failed: the text the client sees and the detail
// for the log.
type authError struct {
	client *amqpwire.Error
	detail string
}

// authenticate checks a connection.start-ok's mechanism and response for a
// client at remote, returning the user name.
func (s *userStore) authenticate(mechanism, response string, remote net.Addr) (string, *authError) {
	var user, pass string
	var ok bool
	switch mechanism {
	case "PLAIN":
		user, pass, ok = parsePlain(response)
	case "AMQPLAIN":
		user, pass, ok = parseAMQPlain(response)
	default:
		// RabbitMQ closes with 503 for a mechanism it did not offer.
		e := amqpwire.Errorf(amqpwire.CodeCommandInvalid, "unknown authentication mechanism '%s'", mechanism)
		return "", &authError{client: e, detail: "unknown mechanism"}
	}
	refused := func(detail string) *authError {
		e := amqpwire.Errorf(amqpwire.CodeAccessRefused,
			"Login was refused using authentication mechanism %s. For details see the broker logfile.", mechanism)
		e.Hard = true
		return &authError{client: e, detail: detail}
	}
	if !ok {
		return "", refused("malformed " + mechanism + " response")
	}
	want, known := s.passwords[user]
	if !known || subtle.ConstantTimeCompare([]byte(want), []byte(pass)) != 1 {
		return "", refused("invalid credentials for user '" + user + "'")
	}
	// Anything but a loopback TCP peer is refused, an in-memory pipe
	// included: the check fails closed (netserve.FromLoopback).
	if s.loopback[user] && !netserve.FromLoopback(remote.String()) {
		e := amqpwire.Errorf(amqpwire.CodeAccessRefused, "User '%s' can only connect via localhost", user)
		e.Hard = true
		return "", &authError{client: e, detail: "user may only connect via localhost"}
	}
	return user, nil
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
