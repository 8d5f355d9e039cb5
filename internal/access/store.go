package access

import (
	"cmp"
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
// is durable.
type KV interface {
	Put(key string, value []byte) error
	Delete(key string) error
	Load(fn func(key string, value []byte) error) error
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
type Store struct {
	kv KV
	// generation changes with every change of a permission, so checks a
	// Principal remembers are dropped when they may no longer hold.
	generation atomic.Uint64

	mu           sync.RWMutex
	perms        map[userVHost]*grant
	topics       map[userVHost]map[string]*topicGrant // by exchange
	bootstrapped map[string]bool                      // users GrantOnce has seen
}

// Open loads every permission from kv.
func Open(kv KV) (*Store, error) {
	s := &Store{kv: kv, perms: map[userVHost]*grant{}, topics: map[userVHost]map[string]*topicGrant{},
		bootstrapped: map[string]bool{}}
	err := kv.Load(func(key string, value []byte) error {
		switch {
		case strings.HasPrefix(key, permissionKeys):
			var p Permission
			if err := json.Unmarshal(value, &p); err != nil {
				return fmt.Errorf("access: record %q: %w", key, err)
			}
			g, err := compileGrant(p)
			if err != nil {
				return fmt.Errorf("access: record %q: %w", key, err)
			}
			s.perms[userVHost{p.User, p.VHost}] = g
		case strings.HasPrefix(key, topicKeys):
			var tp TopicPermission
			if err := json.Unmarshal(value, &tp); err != nil {
				return fmt.Errorf("access: record %q: %w", key, err)
			}
			g, err := compileTopicGrant(tp)
			if err != nil {
				return fmt.Errorf("access: record %q: %w", key, err)
			}
			s.putTopicLocked(g)
		case strings.HasPrefix(key, bootstrapKeys):
			user, err := url.PathUnescape(strings.TrimPrefix(key, bootstrapKeys))
			if err != nil {
				return fmt.Errorf("access: record %q: %w", key, err)
			}
			s.bootstrapped[user] = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
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
	g, err := compileGrant(p)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.kv.Put(permissionKey(p.VHost, p.User), mustJSON(p)); err != nil {
		return err
	}
	s.perms[userVHost{p.User, p.VHost}] = g
	s.generation.Add(1)
	return nil
}

// Permission returns a user's permission in a vhost.
func (s *Store) Permission(user, vhost string) (Permission, bool) {
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
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deletePermissionLocked(userVHost{user, vhost})
}

func (s *Store) deletePermissionLocked(k userVHost) error {
	if s.perms[k] == nil {
		return ErrNotFound
	}
	if err := s.kv.Delete(permissionKey(k.vhost, k.user)); err != nil {
		return err
	}
	delete(s.perms, k)
	s.generation.Add(1)
	return nil
}

// SetTopicPermission creates or replaces a user's topic permission on
// one exchange of a vhost (which need not exist yet, as in RabbitMQ).
func (s *Store) SetTopicPermission(tp TopicPermission) error {
	g, err := compileTopicGrant(tp)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.kv.Put(topicKey(tp.VHost, tp.User, tp.Exchange), mustJSON(tp)); err != nil {
		return err
	}
	s.putTopicLocked(g)
	s.generation.Add(1)
	return nil
}

func (s *Store) putTopicLocked(g *topicGrant) {
	k := userVHost{g.User, g.VHost}
	if s.topics[k] == nil {
		s.topics[k] = map[string]*topicGrant{}
	}
	s.topics[k][g.Exchange] = g
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
// the one on exchange, or all of them when exchange is "".
func (s *Store) DeleteTopicPermissions(user, vhost, exchange string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deleteTopicsLocked(userVHost{user, vhost}, exchange)
}

func (s *Store) deleteTopicsLocked(k userVHost, exchange string) error {
	byExchange := s.topics[k]
	if len(byExchange) == 0 || exchange != "" && byExchange[exchange] == nil {
		return ErrNotFound
	}
	for name := range byExchange {
		if exchange != "" && name != exchange {
			continue
		}
		if err := s.kv.Delete(topicKey(k.vhost, k.user, name)); err != nil {
			return err
		}
		delete(byExchange, name)
		s.generation.Add(1)
	}
	if len(byExchange) == 0 {
		delete(s.topics, k)
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

func (s *Store) forget(match func(userVHost) bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.perms {
		if match(k) {
			if err := s.deletePermissionLocked(k); err != nil {
				return err
			}
		}
	}
	for k := range s.topics {
		if match(k) {
			if err := s.deleteTopicsLocked(k, ""); err != nil {
				return err
			}
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
	s.mu.RLock()
	done := s.bootstrapped[user]
	s.mu.RUnlock()
	if done {
		return nil
	}
	if _, has := s.Permission(user, vhost); !has {
		if err := s.GrantAll(user, vhost); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.kv.Put(bootstrapKeys+url.PathEscape(user), []byte("{}")); err != nil {
		return err
	}
	s.bootstrapped[user] = true
	return nil
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
