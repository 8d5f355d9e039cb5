package access

import (
	"context"
	"regexp"
	"strings"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// Perm is one of RabbitMQ's three permissions.
type Perm string

const (
	Configure Perm = "configure" // create, delete or alter a resource
	Write     Perm = "write"     // put messages in (publish, bind as destination)
	Read      Perm = "read"      // take messages out (consume, get, purge, bind as source)
)

// Kind is the kind of resource checked, as RabbitMQ's texts name it.
type Kind string

const (
	Queue    Kind = "queue"
	Exchange Kind = "exchange"
)

// defaultExchange is the name the default exchange ("") is checked and
// named by, as in RabbitMQ.
const defaultExchange = "amq.default"

// HasVHostAccessContext reports whether user may use vhost: it has a
// permission there. A miss catches up with the cluster (see Store) until
// ctx ends at most (an AMQP handshake's deadline; an API request's bound,
// or its client going away), and the user is then refused.
func (s *Store) HasVHostAccessContext(ctx context.Context, user, vhost string) bool {
	_, ok := s.PermissionContext(ctx, user, vhost)
	return ok
}

// HasVHostAccessHere is HasVHostAccessContext as this node applied the
// permissions, without catching up: for a caller that checks many vhosts
// and catches up once for them all (CatchUp).
func (s *Store) HasVHostAccessHere(user, vhost string) bool {
	_, ok := s.localPermission(user, vhost)
	return ok
}

// CatchUp waits for the cluster (see Store), until ctx ends at most, and
// reports whether this node applied a permission meanwhile: only then
// can lookups that missed find something by looking again.
func (s *Store) CatchUp(ctx context.Context) bool { return s.caughtUp(ctx) }

// allows reports whether user's permission in vhost grants perm on the
// resource name.
func (s *Store) allows(user, vhost string, perm Perm, name string) bool {
	s.mu.RLock()
	g := s.perms[userVHost{user, vhost}]
	s.mu.RUnlock()
	if g == nil {
		return false
	}
	re := g.read
	switch perm {
	case Configure:
		re = g.configure
	case Write:
		re = g.write
	}
	return re.MatchString(name)
}

// topicAllows reports whether user's topic permission on exchange in
// vhost grants perm (write or read) on routing key; true when it has
// none there.
func (s *Store) topicAllows(user, vhost, exchange string, perm Perm, key string) bool {
	s.mu.RLock()
	g := s.topics[userVHost{user, vhost}][exchange]
	s.mu.RUnlock()
	if g == nil {
		return true
	}
	re, expr := g.read, g.Read
	if perm == Write {
		re, expr = g.write, g.Write
	}
	if re == nil {
		var err error
		if re, err = compile(expandVariables(expr, user, vhost)); err != nil {
			return false // checked when set; deny rather than guess
		}
	}
	return re.MatchString(key)
}

// narrowsTopic reports whether user has a topic permission on exchange
// in vhost.
func (s *Store) narrowsTopic(user, vhost, exchange string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.topics[userVHost{user, vhost}][exchange] != nil
}

// The variables a topic permission may name.
const (
	usernameVariable = "{username}"
	vhostVariable    = "{vhost}"
)

func hasVariable(expr string) bool {
	return strings.Contains(expr, usernameVariable) || strings.Contains(expr, vhostVariable)
}

// expandVariables puts the user's and the vhost's names, quoted, where
// expr names them.
func expandVariables(expr, user, vhost string) string {
	if !hasVariable(expr) {
		return expr
	}
	return strings.NewReplacer(usernameVariable, regexp.QuoteMeta(user), vhostVariable, regexp.QuoteMeta(vhost)).Replace(expr)
}

// refused is RabbitMQ's 403 for a resource check.
func refused(perm Perm, kind Kind, name, vhost, user string) error {
	return amqpwire.Errorf(amqpwire.CodeAccessRefused, "%s access to %s '%s' in vhost '%s' refused for user '%s'",
		perm, kind, name, vhost, user)
}

// VHostRefused is RabbitMQ's answer to connection.open for a vhost the
// user has no permission in: 530 NOT_ALLOWED, closing the connection.
func VHostRefused(vhost, user string) *amqpwire.Error {
	return amqpwire.Errorf(amqpwire.CodeNotAllowed, "access to vhost '%s' refused for user '%s'", vhost, user)
}
