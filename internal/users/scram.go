package users

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"fmt"
	"hash"
)

// Mechanism is a SCRAM mechanism, named as SASL names it.
type Mechanism string

const (
	ScramSHA256 Mechanism = "SCRAM-SHA-256"
	ScramSHA512 Mechanism = "SCRAM-SHA-512"
)

// Mechanisms lists the SCRAM mechanisms a password sets, in Kafka's order.
var Mechanisms = []Mechanism{ScramSHA256, ScramSHA512}

// DefaultIterations is the PBKDF2 iteration count of passwords set through
// Wharf: Kafka's minimum and RabbitMQ's SCRAM default.
const DefaultIterations = 4096

// MinIterations and MaxIterations bound what AlterUserScramCredentials may
// ask for, as Kafka bounds them (4096 to 16384).
const (
	MinIterations = 4096
	MaxIterations = 16384
)

// Hash returns the mechanism's hash constructor, or nil for a mechanism
// that is not SCRAM.
func (m Mechanism) Hash() func() hash.Hash {
	switch m {
	case ScramSHA256:
		return sha256.New
	case ScramSHA512:
		return sha512.New
	}
	return nil
}

// Credential is one mechanism's salted credential (RFC 5802 section 3):
// what a server needs to check a client's proof and to prove itself, and
// nothing from which the password can be read back.
type Credential struct {
	Salt       []byte `json:"salt"`
	Iterations int    `json:"iterations"`
	StoredKey  []byte `json:"stored_key"`
	ServerKey  []byte `json:"server_key"`
}

// NewCredential derives a credential for password with a fresh random salt.
func NewCredential(m Mechanism, password string, iterations int) (Credential, error) {
	salt := make([]byte, 32)
	if _, err := rand.Read(salt); err != nil {
		return Credential{}, err
	}
	salted, err := SaltedPassword(m, password, salt, iterations)
	if err != nil {
		return Credential{}, err
	}
	return CredentialFromSalted(m, salt, salted, iterations)
}

// SaltedPassword is RFC 5802's Hi(Normalize(password), salt, i): PBKDF2
// with the mechanism's HMAC. (SASLprep is not applied: Kafka's clients do
// not apply it either.)
func SaltedPassword(m Mechanism, password string, salt []byte, iterations int) ([]byte, error) {
	h := m.Hash()
	if h == nil {
		return nil, fmt.Errorf("users: %q is not a SCRAM mechanism", m)
	}
	return pbkdf2.Key(h, password, salt, iterations, h().Size())
}

// CredentialFromSalted derives StoredKey and ServerKey from a salted
// password, as a server does with what AlterUserScramCredentials carries.
func CredentialFromSalted(m Mechanism, salt, salted []byte, iterations int) (Credential, error) {
	h := m.Hash()
	if h == nil {
		return Credential{}, fmt.Errorf("users: %q is not a SCRAM mechanism", m)
	}
	clientKey := HMAC(h, salted, []byte("Client Key"))
	stored := h()
	stored.Write(clientKey)
	return Credential{
		Salt:       append([]byte(nil), salt...),
		Iterations: iterations,
		StoredKey:  stored.Sum(nil),
		ServerKey:  HMAC(h, salted, []byte("Server Key")),
	}, nil
}

// Matches reports whether password is the one the credential was derived
// from, in time independent of where they differ.
func (c Credential) Matches(m Mechanism, password string) bool {
	salted, err := SaltedPassword(m, password, c.Salt, c.Iterations)
	if err != nil {
		return false
	}
	derived, err := CredentialFromSalted(m, c.Salt, salted, c.Iterations)
	if err != nil {
		return false
	}
	return subtle.ConstantTimeCompare(derived.StoredKey, c.StoredKey) == 1
}

// HMAC is HMAC(key, msg) with hash h.
func HMAC(h func() hash.Hash, key, msg []byte) []byte {
	m := hmac.New(h, key)
	m.Write(msg)
	return m.Sum(nil)
}
