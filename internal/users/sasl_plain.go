package users

import (
	"bytes"
	"errors"
	"unicode/utf8"
)

// ErrMalformed is a SASL message that does not follow its mechanism's
// grammar.
var ErrMalformed = errors.New("malformed SASL message")

// ParsePlain splits a SASL PLAIN message (RFC 4616: [authzid] NUL authcid
// NUL passwd), as Kafka's PLAIN and AMQP's PLAIN carry it. The error never
// quotes the message, which holds the password.
func ParsePlain(msg []byte) (authzid, user, password string, err error) {
	parts := bytes.SplitN(msg, []byte{0}, 3)
	if len(parts) != 3 || !utf8.Valid(msg) {
		return "", "", "", ErrMalformed
	}
	return string(parts[0]), string(parts[1]), string(parts[2]), nil
}
