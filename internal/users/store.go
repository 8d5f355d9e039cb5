package users

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// KV is the durable key-value store the users live in: the metadata log's
// definition store, seen through a key prefix. Put and Delete return once
// the change is durable and applied on this node.
type KV interface {
	Put(key string, value []byte) error
	Delete(key string) error
	// Follow calls fn with every key under prefix, then with every
	// change of one as this node applies it, in log order (value nil:
	// deleted), whichever node made it; on the node that made it before
	// Put or Delete returns.
	Follow(prefix string, fn func(key string, value []byte) error) error
	// BarrierContext returns once this node applied every change made
	// before the call on any node of the cluster, or with ctx's cause
	// once ctx ends.
	BarrierContext(ctx context.Context) error
}

// keyPrefix marks the user records among the node's other definitions.
const keyPrefix = "user/"

// initialisedKey records that the store was given its first users
// (Bootstrap): a store emptied later stays empty, as RabbitMQ creates its
// default user on a new node only.
const initialisedKey = "users-initialised"

// The management tags RabbitMQ knows; others are kept as given, as
// RabbitMQ keeps them.
const (
	TagAdministrator = "administrator"
	TagManagement    = "management"
	TagMonitoring    = "monitoring"
	TagPolicymaker   = "policymaker"
)

// User is one user as the store keeps it.
type User struct {
	Name        string                   `json:"name"`
	Tags        []string                 `json:"tags,omitempty"`
	Credentials map[Mechanism]Credential `json:"credentials,omitempty"`
}

// HasTag reports whether the user carries tag.
func (u User) HasTag(tag string) bool { return slices.Contains(u.Tags, tag) }

// Errors the store returns; callers map them to their protocol's codes.
var (
	ErrNoSuchUser   = errors.New("no such user")
	ErrInvalidName  = errors.New("invalid user name")
	ErrNoPassword   = errors.New("empty password")
	ErrIterations   = fmt.Errorf("iterations must be from %d to %d", MinIterations, MaxIterations)
	ErrNotMechanism = errors.New("not a SCRAM mechanism")
)

// Store is the user store. Its methods are safe for concurrent use.
//
// Its users are what this node applied of the metadata log: a change
// made on another node arrives here as it is applied, one replication
// round trip later. A lookup that misses (an unknown user, a credential
// it lacks, a password that does not match) first waits for the cluster
// (KV.BarrierContext) and looks again, so a user made or changed on any
// node just before is found; a change that takes something away (a
// password changed, a user deleted) is seen here as it is applied.
type Store struct {
	kv KV

	writeMu sync.Mutex // serialises changes, each of which reads a user and writes it back
	mu      sync.RWMutex
	users   map[string]User // as the KV applied them
	applied atomic.Uint64   // counts the changes applied, so a lookup knows whether catching up changed anything
	// initialised: the KV holds initialisedKey.
	initialised atomic.Bool
}

// Open loads every user from kv and follows its changes.
func Open(kv KV) (*Store, error) {
	s := &Store{kv: kv, users: map[string]User{}}
	if err := kv.Follow(keyPrefix, s.apply); err != nil {
		return nil, err
	}
	err := kv.Follow(initialisedKey, func(key string, value []byte) error {
		if key == initialisedKey {
			s.initialised.Store(value != nil)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// apply makes a user record the KV applied this node's view of the user.
func (s *Store) apply(key string, value []byte) error {
	name := strings.TrimPrefix(key, keyPrefix)
	var u User
	if value != nil {
		if err := json.Unmarshal(value, &u); err != nil {
			return fmt.Errorf("users: record %q: %w", key, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if value == nil {
		delete(s.users, name)
	} else {
		s.users[name] = u
	}
	s.applied.Add(1)
	return nil
}

// caughtUp waits for the cluster (see Store), until ctx ends at most,
// and reports whether this node applied a change of a user meanwhile:
// only then can a lookup that missed find something by looking again.
// Without a quorum, or once ctx ends, it reports false, and the lookup
// stands.
func (s *Store) caughtUp(ctx context.Context) bool {
	before := s.applied.Load()
	return s.kv.BarrierContext(ctx) == nil && s.applied.Load() != before
}

// Empty reports whether the store holds no user, as on a node's first
// start (in a cluster, on every node: none has made one).
func (s *Store) Empty() bool {
	empty := s.count() == 0
	if empty && s.caughtUp(context.Background()) {
		empty = s.count() == 0
	}
	return empty
}

func (s *Store) count() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.users)
}

// Get returns a user.
func (s *Store) Get(name string) (User, bool) { return s.GetContext(context.Background(), name) }

// GetContext is Get for a caller bound by a deadline of its own (an
// AMQP handshake's): the catch-up of a miss ends when ctx does, and the
// miss then stands.
func (s *Store) GetContext(ctx context.Context, name string) (User, bool) {
	u, ok := s.local(name)
	if !ok && s.caughtUp(ctx) {
		u, ok = s.local(name)
	}
	return u, ok
}

// local returns a user as this node applied it, without waiting for the
// cluster.
func (s *Store) local(name string) (User, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	u, ok := s.users[name]
	return u, ok
}

// List returns every user, by name.
func (s *Store) List() []User {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.SortedFunc(maps.Values(s.users), func(a, b User) int { return strings.Compare(a.Name, b.Name) })
}

// Authenticate checks a plain password (AMQP PLAIN, Kafka PLAIN, HTTP
// basic auth) against the user's SCRAM-SHA-256 credential, or its
// SCRAM-SHA-512 one when that is all it has. An unknown user costs the same
// derivation as a known one, so timing does not tell which names exist.
func (s *Store) Authenticate(name, password string) (User, bool) {
	return s.AuthenticateContext(context.Background(), name, password)
}

// AuthenticateContext is Authenticate with the catch-up of a miss ended
// by ctx (Login's; Kafka PLAIN's bound): the miss then stands.
func (s *Store) AuthenticateContext(ctx context.Context, name, password string) (User, bool) {
	u, ok := s.authenticate(name, password)
	if !ok && s.caughtUp(ctx) {
		u, ok = s.authenticate(name, password)
	}
	return u, ok
}

func (s *Store) authenticate(name, password string) (User, bool) {
	u, ok := s.local(name)
	for _, m := range Mechanisms {
		if c, has := u.Credentials[m]; has {
			return u, ok && c.Matches(m, password)
		}
	}
	decoy.Matches(ScramSHA256, password)
	return User{}, false
}

// decoy is checked against when a user has no credential, so a login for
// an unknown name takes as long as one for a known name.
var decoy = func() Credential {
	c, err := CredentialFromSalted(ScramSHA256, make([]byte, 32), make([]byte, 32), DefaultIterations)
	if err != nil {
		panic(err)
	}
	return c
}()

// CredentialContext returns a user's credential for a SCRAM mechanism.
// The catch-up of a miss ends with ctx (a SCRAM exchange's: Kafka's
// bound), and the miss then stands.
func (s *Store) CredentialContext(ctx context.Context, name string, m Mechanism) (Credential, bool) {
	c, ok := s.credential(name, m)
	if !ok && s.caughtUp(ctx) {
		c, ok = s.credential(name, m)
	}
	return c, ok
}

func (s *Store) credential(name string, m Mechanism) (Credential, bool) {
	u, _ := s.local(name)
	c, ok := u.Credentials[m]
	return c, ok
}

// Put creates or replaces a user with a password (for every SCRAM
// mechanism, with DefaultIterations) and tags, as RabbitMQ's add_user and
// the management API's PUT /api/users/{name} do.
func (s *Store) Put(name, password string, tags []string) error {
	if err := checkName(name); err != nil {
		return err
	}
	creds, err := credentialsFor(password)
	if err != nil {
		return err
	}
	return s.save(User{Name: name, Tags: normalTags(tags), Credentials: creds})
}

// SetPassword replaces a user's password for every mechanism, keeping its
// tags.
func (s *Store) SetPassword(name, password string) error {
	creds, err := credentialsFor(password)
	if err != nil {
		return err
	}
	return s.update(name, func(u *User) { u.Credentials = creds })
}

// SetTags replaces a user's tags.
func (s *Store) SetTags(name string, tags []string) error {
	return s.update(name, func(u *User) { u.Tags = normalTags(tags) })
}

// SetCredential sets one mechanism's credential from a salted password, as
// Kafka's AlterUserScramCredentials upsertion does; the user is created
// when missing, as Kafka creates SCRAM users.
func (s *Store) SetCredential(name string, m Mechanism, salt, salted []byte, iterations int) error {
	if err := checkName(name); err != nil {
		return err
	}
	if m.Hash() == nil {
		return ErrNotMechanism
	}
	if iterations < MinIterations || iterations > MaxIterations {
		return ErrIterations
	}
	c, err := CredentialFromSalted(m, salt, salted, iterations)
	if err != nil {
		return err
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	u, ok := s.Get(name)
	if !ok {
		u = User{Name: name}
	}
	u.Credentials = maps.Clone(u.Credentials)
	if u.Credentials == nil {
		u.Credentials = map[Mechanism]Credential{}
	}
	u.Credentials[m] = c
	return s.write(u)
}

// DeleteCredential removes one mechanism's credential, as Kafka's
// AlterUserScramCredentials deletion does; the user stays.
func (s *Store) DeleteCredential(name string, m Mechanism) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	u, ok := s.Get(name)
	if _, has := u.Credentials[m]; !ok || !has {
		return ErrNoSuchUser
	}
	u.Credentials = maps.Clone(u.Credentials)
	delete(u.Credentials, m)
	return s.write(u)
}

// Delete removes a user.
func (s *Store) Delete(name string) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if _, ok := s.Get(name); !ok {
		return ErrNoSuchUser
	}
	return s.kv.Delete(keyPrefix + name)
}

func (s *Store) update(name string, change func(*User)) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	u, ok := s.Get(name)
	if !ok {
		return ErrNoSuchUser
	}
	change(&u)
	return s.write(u)
}

// save creates or replaces u whole.
func (s *Store) save(u User) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	return s.write(u)
}

// write stores u durably; the KV applies it (apply) before it returns.
// writeMu is held.
func (s *Store) write(u User) error {
	data, err := json.Marshal(u)
	if err != nil {
		return err
	}
	return s.kv.Put(keyPrefix+u.Name, data)
}

func credentialsFor(password string) (map[Mechanism]Credential, error) {
	if password == "" {
		return nil, ErrNoPassword
	}
	creds := make(map[Mechanism]Credential, len(Mechanisms))
	for _, m := range Mechanisms {
		c, err := NewCredential(m, password, DefaultIterations)
		if err != nil {
			return nil, err
		}
		creds[m] = c
	}
	return creds, nil
}

// checkName refuses what no protocol can carry: an empty name, one that is
// not UTF-8 (AMQP and Kafka names are), or one with a NUL (SASL PLAIN's
// separator).
func checkName(name string) error {
	if name == "" || !utf8.ValidString(name) || strings.ContainsRune(name, 0) {
		return fmt.Errorf("%w: %q", ErrInvalidName, name)
	}
	return nil
}

// normalTags sorts tags and drops empty ones and repeats, so that a user's
// record does not change with the order tags were given in.
func normalTags(tags []string) []string {
	out := slices.DeleteFunc(slices.Clone(tags), func(t string) bool { return strings.TrimSpace(t) == "" })
	for i := range out {
		out[i] = strings.TrimSpace(out[i])
	}
	slices.Sort(out)
	return slices.Compact(out)
}
