package users

import (
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
)

// HashingAlgorithm names the password_hash format of PasswordHash in
// RabbitMQ's user objects (the management API, definitions), where
// RabbitMQ writes "rabbit_password_hashing_sha256". A RabbitMQ hash
// cannot become SCRAM keys without the password, so only this format is
// accepted back.
const HashingAlgorithm = "wharf_scram"

// ErrPasswordHash is a password_hash that is not PasswordHash's format.
var ErrPasswordHash = errors.New("invalid password_hash")

// PasswordHash writes the user's credentials as RFC 5803 does, one per
// mechanism, separated by a space:
// "SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>" (base64).
// From it a server can check a password or a SCRAM proof but cannot
// learn the password. A user without credentials (it logs in with a TLS
// client certificate only) gives "".
func (u User) PasswordHash() string {
	var parts []string
	for _, m := range Mechanisms {
		c, ok := u.Credentials[m]
		if !ok {
			continue
		}
		b64 := base64.StdEncoding.EncodeToString
		parts = append(parts, fmt.Sprintf("%s$%d:%s$%s:%s", m, c.Iterations, b64(c.Salt), b64(c.StoredKey), b64(c.ServerKey)))
	}
	return strings.Join(parts, " ")
}

// ParsePasswordHash reads what PasswordHash writes.
func ParsePasswordHash(hash string) (map[Mechanism]Credential, error) {
	creds := map[Mechanism]Credential{}
	for _, part := range strings.Fields(hash) {
		m, c, err := parseCredential(part)
		if err != nil {
			return nil, err
		}
		if _, dup := creds[m]; dup {
			return nil, fmt.Errorf("%w: %s twice", ErrPasswordHash, m)
		}
		creds[m] = c
	}
	return creds, nil
}

func parseCredential(s string) (Mechanism, Credential, error) {
	bad := func(why string) (Mechanism, Credential, error) {
		return "", Credential{}, fmt.Errorf("%w: %s", ErrPasswordHash, why)
	}
	mech, rest, ok1 := strings.Cut(s, "$")
	params, keys, ok2 := strings.Cut(rest, "$")
	iter, salt64, ok3 := strings.Cut(params, ":")
	stored64, server64, ok4 := strings.Cut(keys, ":")
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return bad("want MECHANISM$ITERATIONS:SALT$STOREDKEY:SERVERKEY")
	}
	m := Mechanism(mech)
	h := m.Hash()
	if h == nil {
		return bad(strconv.Quote(mech) + " is not a SCRAM mechanism")
	}
	iterations, err := strconv.Atoi(iter)
	if err != nil || iterations < MinIterations || iterations > MaxIterations {
		return bad(ErrIterations.Error())
	}
	c := Credential{Iterations: iterations}
	for _, f := range []struct {
		text string
		into *[]byte
		size int
	}{{salt64, &c.Salt, 0}, {stored64, &c.StoredKey, h().Size()}, {server64, &c.ServerKey, h().Size()}} {
		b, err := base64.StdEncoding.DecodeString(f.text)
		if err != nil || len(b) == 0 || f.size > 0 && len(b) != f.size {
			return bad("a salt or key of the wrong form")
		}
		*f.into = b
	}
	return m, c, nil
}

// PutCredentials creates or replaces a user with credentials as
// ParsePasswordHash read them, and tags. Without credentials the user
// cannot log in with a password, only with a TLS client certificate
// (AMQP EXTERNAL), as RabbitMQ's passwordless users.
func (s *Store) PutCredentials(name string, creds map[Mechanism]Credential, tags []string) error {
	if err := checkName(name); err != nil {
		return err
	}
	return s.save(User{Name: name, Tags: normalTags(tags), Credentials: maps.Clone(creds)})
}
