package users

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Why a SCRAM exchange failed, for the server's log; a client is told no
// more than that authentication failed.
var (
	// ErrBadCredentials is an unknown user or a wrong password (a proof
	// that does not match): the two are not told apart.
	ErrBadCredentials = errors.New("invalid credentials")
	// ErrAuthzid is a client asking to act as another user than the one
	// it authenticates as, which neither Kafka nor Wharf allows.
	ErrAuthzid = errors.New("client requested an authorization id that is different from username")
	// ErrUnsupported is a SCRAM feature Wharf does not serve: channel
	// binding, or Kafka's delegation-token authentication.
	ErrUnsupported = errors.New("unsupported SCRAM feature")
)

// ScramExchange is the server side of one SCRAM authentication (RFC 5802
// with RFC 7677's SHA-256, and SHA-512 as Kafka has it) against the
// store: feed it the client's messages with Step. It is not safe for
// concurrent use.
//
// A user who does not exist, or has no credential for the mechanism, is
// answered with a made-up salt (stable per name, so asking twice does not
// tell) and fails at the proof, as a wrong password does: the exchange
// does not reveal which names exist.
type ScramExchange struct {
	store *Store
	mech  Mechanism
	step  int // messages received so far

	user            string
	cred            Credential
	known           bool
	gs2Header       string
	clientFirstBare string
	serverFirst     string
	nonce           string
}

// NewScramExchange starts an exchange for mechanism m.
func (s *Store) NewScramExchange(m Mechanism) (*ScramExchange, error) {
	if m.Hash() == nil {
		return nil, ErrNotMechanism
	}
	return &ScramExchange{store: s, mech: m}, nil
}

// User is the name the client authenticates as, once its first message
// was read.
func (e *ScramExchange) User() string { return e.user }

// Step takes the client's next message and returns the server's answer.
// done reports a completed, successful authentication (the answer is then
// the server-final message). An error ends the exchange: authentication
// failed, for the reason it wraps (ErrMalformed, ErrBadCredentials,
// ErrAuthzid, ErrUnsupported). ctx ends the catch-up of a user the store
// does not have (Store.CredentialContext): the exchange then goes on
// against a made-up credential, and fails at the proof, as for a user
// that exists nowhere.
func (e *ScramExchange) Step(ctx context.Context, msg []byte) (answer []byte, done bool, err error) {
	e.step++
	switch e.step {
	case 1:
		answer, err = e.clientFirst(ctx, string(msg))
		return answer, false, err
	case 2:
		answer, err = e.clientFinal(string(msg))
		return answer, err == nil, err
	}
	return nil, false, fmt.Errorf("%w: message after the exchange ended", ErrMalformed)
}

// clientFirst reads "gs2-header client-first-bare" and returns the
// server-first message.
func (e *ScramExchange) clientFirst(ctx context.Context, msg string) ([]byte, error) {
	// gs2-header: cbind-flag "," [authzid] ","
	flag, rest, ok := strings.Cut(msg, ",")
	if !ok {
		return nil, fmt.Errorf("%w: no GS2 header", ErrMalformed)
	}
	switch {
	case flag == "n", flag == "y":
	case strings.HasPrefix(flag, "p="):
		return nil, fmt.Errorf("%w: channel binding", ErrUnsupported)
	default:
		return nil, fmt.Errorf("%w: channel binding flag %q", ErrMalformed, flag)
	}
	authzField, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return nil, fmt.Errorf("%w: no GS2 header", ErrMalformed)
	}
	e.gs2Header = flag + "," + authzField + ","
	e.clientFirstBare = bare

	fields := strings.Split(bare, ",")
	if len(fields) < 2 || !strings.HasPrefix(fields[0], "n=") || !strings.HasPrefix(fields[1], "r=") {
		return nil, fmt.Errorf("%w: client-first-message", ErrMalformed)
	}
	user, err := saslName(fields[0][2:])
	if err != nil {
		return nil, err
	}
	e.user = user
	clientNonce := fields[1][2:]
	if clientNonce == "" || strings.ContainsAny(clientNonce, ",") {
		return nil, fmt.Errorf("%w: client nonce", ErrMalformed)
	}
	for _, ext := range fields[2:] {
		// Kafka's SCRAM extensions; tokenauth is delegation tokens.
		if ext == "tokenauth=true" {
			return nil, fmt.Errorf("%w: delegation tokens", ErrUnsupported)
		}
	}
	if authzField != "" {
		authzid, found := strings.CutPrefix(authzField, "a=")
		if !found {
			return nil, fmt.Errorf("%w: GS2 authzid", ErrMalformed)
		}
		if authzid, err = saslName(authzid); err != nil {
			return nil, err
		}
		if authzid != user {
			return nil, ErrAuthzid
		}
	}

	e.cred, e.known = e.store.CredentialContext(ctx, user, e.mech)
	if !e.known {
		e.cred = decoyCredential(e.mech, user)
	}
	serverNonce := make([]byte, 24)
	if _, err := rand.Read(serverNonce); err != nil {
		return nil, err
	}
	e.nonce = clientNonce + base64.RawURLEncoding.EncodeToString(serverNonce)
	e.serverFirst = "r=" + e.nonce + ",s=" + base64.StdEncoding.EncodeToString(e.cred.Salt) + ",i=" + strconv.Itoa(e.cred.Iterations)
	return []byte(e.serverFirst), nil
}

// clientFinal checks "c=...,r=...,p=..." and returns the server-final
// message.
func (e *ScramExchange) clientFinal(msg string) ([]byte, error) {
	withoutProof, proofField, ok := cutLast(msg, ",p=")
	if !ok {
		return nil, fmt.Errorf("%w: no proof", ErrMalformed)
	}
	fields := strings.Split(withoutProof, ",")
	if len(fields) < 2 || !strings.HasPrefix(fields[0], "c=") || !strings.HasPrefix(fields[1], "r=") {
		return nil, fmt.Errorf("%w: client-final-message", ErrMalformed)
	}
	if fields[0][2:] != base64.StdEncoding.EncodeToString([]byte(e.gs2Header)) {
		return nil, fmt.Errorf("%w: channel binding data does not match the GS2 header", ErrMalformed)
	}
	// RFC 5802 wants the nonce echoed as it was sent; librdkafka 2.0
	// (Debian 12's kcat) sends its own nonce in front of it again. The
	// proof covers the server-first message, fresh nonce and all, so a
	// nonce that ends with ours is taken.
	if !strings.HasSuffix(fields[1][2:], e.nonce) {
		return nil, fmt.Errorf("%w: nonce does not match", ErrMalformed)
	}
	proof, err := base64.StdEncoding.DecodeString(proofField)
	if err != nil {
		return nil, fmt.Errorf("%w: proof is not base64", ErrMalformed)
	}
	h := e.mech.Hash()
	authMessage := []byte(e.clientFirstBare + "," + e.serverFirst + "," + withoutProof)
	signature := HMAC(h, e.cred.StoredKey, authMessage)
	if len(proof) != len(signature) {
		return nil, ErrBadCredentials
	}
	clientKey := make([]byte, len(proof))
	for i := range proof {
		clientKey[i] = proof[i] ^ signature[i]
	}
	stored := h()
	stored.Write(clientKey)
	if subtle.ConstantTimeCompare(stored.Sum(nil), e.cred.StoredKey) != 1 || !e.known {
		return nil, ErrBadCredentials
	}
	return []byte("v=" + base64.StdEncoding.EncodeToString(HMAC(h, e.cred.ServerKey, authMessage))), nil
}

// saslName undoes RFC 5802's escaping of ',' and '=' in names.
func saslName(s string) (string, error) {
	if !strings.Contains(s, "=") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", fmt.Errorf("%w: bad escape in a name", ErrMalformed)
		}
		i += 2
	}
	return b.String(), nil
}

func cutLast(s, sep string) (before, after string, found bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// decoyCredential is what an exchange for an unknown user runs against:
// a salt derived from the name and a key of the process's own, so the
// server-first message looks the same each time the name is tried, and a
// StoredKey no proof matches.
func decoyCredential(m Mechanism, user string) Credential {
	salt := HMAC(sha256.New, decoySaltKey, []byte(string(m)+"\x00"+user))
	return Credential{Salt: salt, Iterations: DefaultIterations, StoredKey: make([]byte, m.Hash()().Size())}
}

// decoySaltKey keys the decoy salts.
var decoySaltKey = func() []byte {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		panic(err)
	}
	return key
}()
