package users

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// KV is the durable key-value store the users live in: the metadata log's
// definition store, seen through a key prefix. Put and Delete return once
// the change is durable.
type KV interface {
	Put(key string, value []byte) error
	Delete(key string) error
	Load(fn func(key string, value []byte) error) error
}

// keyPrefix marks the user records among the node's other definitions.
const keyPrefix = "user/"

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
type Store struct {
	kv KV

	mu    sync.RWMutex
	users map[string]User
}

// Open loads every user from kv.
func Open(kv KV) (*Store, error) {
	s := &Store{kv: kv, users: map[string]User{}}
	err := kv.Load(func(key string, value []byte) error {
		name, ok := strings.CutPrefix(key, keyPrefix)
		if !ok {
			return nil
		}
		var u User
		if err := json.Unmarshal(value, &u); err != nil {
			return fmt.Errorf("users: record %q: %w", key, err)
		}
		s.users[name] = u
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Empty reports whether the store holds no user, as on a node's first start.
func (s *Store) Empty() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.users) == 0
}

// Get returns a user.
func (s *Store) Get(name string) (User, bool) {
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
	u, ok := s.Get(name)
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

// Credential returns a user's credential for a SCRAM mechanism.
func (s *Store) Credential(name string, m Mechanism) (Credential, bool) {
	u, ok := s.Get(name)
	if !ok {
		return Credential{}, false
	}
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
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.users[name]
	if !ok {
		u = User{Name: name}
	}
	u.Credentials = maps.Clone(u.Credentials)
	if u.Credentials == nil {
		u.Credentials = map[Mechanism]Credential{}
	}
	u.Credentials[m] = c
	return s.saveLocked(u)
}

// DeleteCredential removes one mechanism's credential, as Kafka's
// AlterUserScramCredentials deletion does; the user stays.
func (s *Store) DeleteCredential(name string, m Mechanism) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.users[name]
	if _, has := u.Credentials[m]; !ok || !has {
		return ErrNoSuchUser
	}
	u.Credentials = maps.Clone(u.Credentials)
	delete(u.Credentials, m)
	return s.saveLocked(u)
}

// Delete removes a user.
func (s *Store) Delete(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.users[name]; !ok {
		return ErrNoSuchUser
	}
	if err := s.kv.Delete(keyPrefix + name); err != nil {
		return err
	}
	delete(s.users, name)
	return nil
}

func (s *Store) update(name string, change func(*User)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.users[name]
	if !ok {
		return ErrNoSuchUser
	}
	change(&u)
	return s.saveLocked(u)
}

func (s *Store) save(u User) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.saveLocked(u)
}

// saveLocked writes u durably, then makes it visible.
func (s *Store) saveLocked(u User) error {
	data, err := json.Marshal(u)
	if err != nil {
		return err
	}
	if err := s.kv.Put(keyPrefix+u.Name, data); err != nil {
		return err
	}
	s.users[u.Name] = u
	return nil
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
