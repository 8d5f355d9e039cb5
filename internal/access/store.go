package access

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// KV is the durable key-value store the permissions live in: the
// metadata log's definition store. Put and Delete return once the change
// is durable and applied on this node.
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

// Definition store keys; names are path-escaped, so a '/' in a name is
// not a separator.
const (
	keyPrefix       = "access/"
	permissionKeys  = keyPrefix + "permission/"       // + vhost/user
	topicKeys       = keyPrefix + "topic-permission/" // + vhost/user/exchange
	bootstrapKeys   = keyPrefix + "bootstrapped/"     // + user
	fullPermissions = ".*"
)

func permissionKey(vhost, user string) string {
	return permissionKeys + url.PathEscape(vhost) + "/" + url.PathEscape(user)
}

func topicKey(vhost, user, exchange string) string {
	return topicKeys + url.PathEscape(vhost) + "/" + url.PathEscape(user) + "/" + url.PathEscape(exchange)
}

// Permission is a user's permission in a vhost, shaped as RabbitMQ's
// management API shows it.
type Permission struct {
	User      string `json:"user"`
	VHost     string `json:"vhost"`
	Configure string `json:"configure"`
	Write     string `json:"write"`
	Read      string `json:"read"`
}

// TopicPermission narrows what a user may publish to and bind from one
// topic exchange of a vhost.
type TopicPermission struct {
	User     string `json:"user"`
	VHost    string `json:"vhost"`
	Exchange string `json:"exchange"`
	Write    string `json:"write"`
	Read     string `json:"read"`
}

// Errors the store returns.
var (
	ErrNotFound      = errors.New("no such permission")
	ErrInvalidRegexp = errors.New("invalid regular expression")
	ErrNoExchange    = errors.New("a topic permission needs an exchange")
)

// userVHost identifies a user in a vhost.
type userVHost struct{ user, vhost string }

// grant is a Permission with its expressions compiled.
type grant struct {
	Permission
	configure, write, read *regexp.Regexp
}

// topicGrant is a TopicPermission with its expressions compiled, or nil
// where they name a variable and are compiled per check.
type topicGrant struct {
	TopicPermission
	write, read *regexp.Regexp
}

// Store holds every permission. Its methods are safe for concurrent use.
//
// Its permissions are what this node applied of the metadata log: a
// change made on another node arrives here as it is applied, one
// replication round trip later. A lookup of a user's permission in a
// vhost that misses (connection.open to a vhost, the management API)
// first waits for the cluster (KV.BarrierContext) and looks again, so a
// permission given on any node just before is found.
type Store struct {
	kv KV
	// generation changes with every change of a permission, so checks a
	// Principal remembers are dropped when they may no longer hold, and a
	// lookup that caught up knows whether to look again.
	generation atomic.Uint64

	writeMu      sync.Mutex   // serialises changes
	mu           sync.RWMutex // guards what follows, changed only as the KV applies it
	perms        map[userVHost]*grant
	topics       map[userVHost]map[string]*topicGrant // by exchange
	bootstrapped map[string]bool                      // users GrantOnce has seen
}

// Open loads every permission from kv and follows its changes.
func Open(kv KV) (*Store, error) {
	s := &Store{kv: kv, perms: map[userVHost]*grant{}, topics: map[userVHost]map[string]*topicGrant{},
		bootstrapped: map[string]bool{}}
	if err := kv.Follow(keyPrefix, s.apply); err != nil {
		return nil, err
	}
	return s, nil
}

// apply makes a record the KV applied part of this node's permissions.
func (s *Store) apply(key string, value []byte) error {
	var change func()
	var err error
	switch {
	case strings.HasPrefix(key, permissionKeys):
		change, err = s.applyPermission(key, value)
	case strings.HasPrefix(key, topicKeys):
		change, err = s.applyTopicPermission(key, value)
	case strings.HasPrefix(key, bootstrapKeys):
		change, err = s.applyBootstrapped(key, value)
	default:
		return nil
	}
	if err != nil {
		return fmt.Errorf("access: record %q: %w", key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	change()
	s.generation.Add(1)
	return nil
}

// The apply functions read a record and return the change it makes,
// for apply to make under s.mu.

func (s *Store) applyPermission(key string, value []byte) (func(), error) {
	names, err := keyNames(key, permissionKeys, 2)
	if err != nil {
		return nil, err
	}
	k := userVHost{vhost: names[0], user: names[1]}
	if value == nil {
		return func() { delete(s.perms, k) }, nil
	}
	var p Permission
	if err := json.Unmarshal(value, &p); err != nil {
		return nil, err
	}
	g, err := compileGrant(p)
	if err != nil {
		return nil, err
	}
	return func() { s.perms[k] = g }, nil
}

func (s *Store) applyTopicPermission(key string, value []byte) (func(), error) {
	names, err := keyNames(key, topicKeys, 3)
	if err != nil {
		return nil, err
	}
	k, exchange := userVHost{vhost: names[0], user: names[1]}, names[2]
	if value == nil {
		return func() {
			delete(s.topics[k], exchange)
			if len(s.topics[k]) == 0 {
				delete(s.topics, k)
			}
		}, nil
	}
	var tp TopicPermission
	if err := json.Unmarshal(value, &tp); err != nil {
		return nil, err
	}
	g, err := compileTopicGrant(tp)
	if err != nil {
		return nil, err
	}
	return func() {
		if s.topics[k] == nil {
			s.topics[k] = map[string]*topicGrant{}
		}
		s.topics[k][exchange] = g
	}, nil
}

func (s *Store) applyBootstrapped(key string, value []byte) (func(), error) {
	names, err := keyNames(key, bootstrapKeys, 1)
	if err != nil {
		return nil, err
	}
	user := names[0]
	if value == nil {
		return func() { delete(s.bootstrapped, user) }, nil
	}
	return func() { s.bootstrapped[user] = true }, nil
}

// keyNames returns the n path-escaped names a key holds after prefix.
func keyNames(key, prefix string, n int) ([]string, error) {
	parts := strings.Split(strings.TrimPrefix(key, prefix), "/")
	if len(parts) != n {
		return nil, fmt.Errorf("want %d names", n)
	}
	for i, p := range parts {
		name, err := url.PathUnescape(p)
		if err != nil {
			return nil, err
		}
		parts[i] = name
	}
	return parts, nil
}

// caughtUp waits for the cluster (see Store), until ctx ends at most,
// and reports whether this node applied a change meanwhile: only then
// can a lookup that missed find something by looking again. Without a
// quorum, or once ctx ends, it reports false, and the lookup stands.
func (s *Store) caughtUp(ctx context.Context) bool {
	before := s.generation.Load()
	return s.kv.BarrierContext(ctx) == nil && s.generation.Load() != before
}

// compile compiles one expression as RabbitMQ reads it: "" matches
// nothing.
func compile(expr string) (*regexp.Regexp, error) {
	if expr == "" {
		expr = "^$"
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, fmt.Errorf("%w %q: %v", ErrInvalidRegexp, expr, err)
	}
	return re, nil
}

func compileGrant(p Permission) (*grant, error) {
	g := &grant{Permission: p}
	var err error
	for _, c := range []struct {
		expr string
		re   **regexp.Regexp
	}{{p.Configure, &g.configure}, {p.Write, &g.write}, {p.Read, &g.read}} {
		if *c.re, err = compile(c.expr); err != nil {
			return nil, err
		}
	}
	return g, nil
}

func compileTopicGrant(tp TopicPermission) (*topicGrant, error) {
	if tp.Exchange == "" {
		return nil, ErrNoExchange
	}
	g := &topicGrant{TopicPermission: tp}
	for _, c := range []struct {
		expr string
		re   **regexp.Regexp
	}{{tp.Write, &g.write}, {tp.Read, &g.read}} {
		// An expression naming a variable is checked here with the
		// variables' own text, then compiled per check once expanded.
		re, err := compile(expandVariables(c.expr, tp.User, tp.VHost))
		if err != nil {
			return nil, err
		}
		if !hasVariable(c.expr) {
			*c.re = re
		}
	}
	return g, nil
}

// SetPermission creates or replaces a user's permission in a vhost. The
// caller checks that both exist.
func (s *Store) SetPermission(p Permission) error {
	if _, err := compileGrant(p); err != nil {
		return err
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	return s.kv.Put(permissionKey(p.VHost, p.User), mustJSON(p))
}

// Permission returns a user's permission in a vhost.
func (s *Store) Permission(user, vhost string) (Permission, bool) {
	return s.PermissionContext(context.Background(), user, vhost)
}

// PermissionContext is Permission with the catch-up of a miss ended by
// ctx (an API request's bound, or its client going away): the miss then
// stands.
func (s *Store) PermissionContext(ctx context.Context, user, vhost string) (Permission, bool) {
	p, ok := s.localPermission(user, vhost)
	if !ok && s.caughtUp(ctx) {
		p, ok = s.localPermission(user, vhost)
	}
	return p, ok
}

// localPermission is Permission as this node applied it, without
// waiting for the cluster.
func (s *Store) localPermission(user, vhost string) (Permission, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	g := s.perms[userVHost{user, vhost}]
	if g == nil {
		return Permission{}, false
	}
	return g.Permission, true
}

// Permissions returns every permission, by user and then vhost.
func (s *Store) Permissions() []Permission {
	s.mu.RLock()
	out := make([]Permission, 0, len(s.perms))
	for _, g := range s.perms {
		out = append(out, g.Permission)
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b Permission) int {
		return cmp.Or(cmp.Compare(a.User, b.User), cmp.Compare(a.VHost, b.VHost))
	})
	return out
}

// DeletePermission removes a user's permission in a vhost, and with it
// the user's access to the vhost.
func (s *Store) DeletePermission(user, vhost string) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if _, ok := s.Permission(user, vhost); !ok {
		return ErrNotFound
	}
	return s.kv.Delete(permissionKey(vhost, user))
}

// SetTopicPermission creates or replaces a user's topic permission on
// one exchange of a vhost (which need not exist yet, as in RabbitMQ).
func (s *Store) SetTopicPermission(tp TopicPermission) error {
	if _, err := compileTopicGrant(tp); err != nil {
		return err
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	return s.kv.Put(topicKey(tp.VHost, tp.User, tp.Exchange), mustJSON(tp))
}

// TopicPermissions returns every topic permission, by user, vhost and
// exchange.
func (s *Store) TopicPermissions() []TopicPermission {
	s.mu.RLock()
	var out []TopicPermission
	for _, byExchange := range s.topics {
		for _, g := range byExchange {
			out = append(out, g.TopicPermission)
		}
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b TopicPermission) int {
		return cmp.Or(cmp.Compare(a.User, b.User), cmp.Compare(a.VHost, b.VHost), cmp.Compare(a.Exchange, b.Exchange))
	})
	return out
}

// DeleteTopicPermissions removes a user's topic permissions in a vhost:
// the one on exchange, or all of them when exchange is "". It first
// waits for the cluster, so it finds those any node gave before.
func (s *Store) DeleteTopicPermissions(user, vhost, exchange string) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := s.kv.BarrierContext(context.Background()); err != nil {
		return err
	}
	k := userVHost{user, vhost}
	s.mu.RLock()
	var names []string
	for name := range s.topics[k] {
		if exchange == "" || name == exchange {
			names = append(names, name)
		}
	}
	s.mu.RUnlock()
	if len(names) == 0 {
		return ErrNotFound
	}
	for _, name := range names {
		if err := s.kv.Delete(topicKey(vhost, user, name)); err != nil {
			return err
		}
	}
	return nil
}

// ForgetUser removes every permission of a deleted user, as RabbitMQ's
// delete_user does.
func (s *Store) ForgetUser(user string) error {
	return s.forget(func(k userVHost) bool { return k.user == user })
}

// ForgetVHost removes every permission in a deleted vhost.
func (s *Store) ForgetVHost(vhost string) error {
	return s.forget(func(k userVHost) bool { return k.vhost == vhost })
}

// forget deletes the permissions and topic permissions of every user and
// vhost match selects, once caught up with the cluster.
func (s *Store) forget(match func(userVHost) bool) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := s.kv.BarrierContext(context.Background()); err != nil {
		return err
	}
	var keys []string
	s.mu.RLock()
	for k := range s.perms {
		if match(k) {
			keys = append(keys, permissionKey(k.vhost, k.user))
		}
	}
	for k, byExchange := range s.topics {
		for exchange := range byExchange {
			if match(k) {
				keys = append(keys, topicKey(k.vhost, k.user, exchange))
			}
		}
	}
	s.mu.RUnlock()
	for _, key := range keys {
		if err := s.kv.Delete(key); err != nil {
			return err
		}
	}
	return nil
}

// GrantOnce gives user every permission in vhost unless it was given a
// first permission this way before: what RabbitMQ gives its default user
// on a new node. A node calls it at every start for its bootstrap users
// (guest, the --admin-user), so each gets its permission once and a
// permission an operator later changes or clears stays as they left it.
func (s *Store) GrantOnce(user, vhost string) error {
	if s.wasBootstrapped(user) {
		return nil
	}
	// A miss of Permission caught up with the cluster: look again at
	// whether another node gave the first permission.
	if _, has := s.Permission(user, vhost); !has && !s.wasBootstrapped(user) {
		if err := s.GrantAll(user, vhost); err != nil {
			return err
		}
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	return s.kv.Put(bootstrapKeys+url.PathEscape(user), []byte("{}"))
}

func (s *Store) wasBootstrapped(user string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.bootstrapped[user]
}

// GrantAll gives user every permission in vhost, as RabbitMQ gives the
// administrator who creates a vhost.
func (s *Store) GrantAll(user, vhost string) error {
	return s.SetPermission(Permission{User: user, VHost: vhost, Configure: fullPermissions, Write: fullPermissions, Read: fullPermissions})
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // plain strings only
	}
	return b
}
