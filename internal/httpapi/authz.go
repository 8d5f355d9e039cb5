package httpapi

import (
	"net/http"
	"slices"

	"github.com/wharf-mq/wharf/internal/access"
	"github.com/wharf-mq/wharf/internal/mq"
	"github.com/wharf-mq/wharf/internal/users"
)

// Who may do what, as RabbitMQ's management plugin decides it
// (rabbit_web_dispatch_access_control): a user gets in only with one of
// the management tags; administrator opens everything; monitoring opens
// every vhost's listing, other users' connections and channels, and the
// nodes; policymaker opens the policies of the vhosts the user has a
// permission in; management opens the objects of those vhosts and the
// user's own connections. A change to a queue, exchange or binding also
// needs the AMQP permission an AMQP client would need (principal), for
// administrators too, as RabbitMQ's API acts through the user's own
// channel.

// rule is who may call an endpoint.
type rule int

const (
	anyManager  rule = iota // any user with a management tag (RabbitMQ's is_authorized)
	vhostUser               // administrators, and users with a permission in the {vhost} (is_authorized_vhost)
	monitor                 // administrators and monitoring users (is_authorized_monitor)
	policymaker             // administrators, and policymakers with a permission in the {vhost} (is_authorized_policies)
	admin                   // administrators (is_authorized_admin)
)

func isManagementUser(u users.User) bool {
	return slices.ContainsFunc(u.Tags, func(t string) bool {
		return t == users.TagAdministrator || t == users.TagMonitoring || t == users.TagPolicymaker || t == users.TagManagement
	})
}

func isAdmin(u users.User) bool { return u.HasTag(users.TagAdministrator) }

// isMonitor reports whether u sees every vhost and everybody's
// connections.
func isMonitor(u users.User) bool { return isAdmin(u) || u.HasTag(users.TagMonitoring) }

func isPolicymaker(u users.User) bool { return isAdmin(u) || u.HasTag(users.TagPolicymaker) }

// authorize checks the request's user against an endpoint's rule,
// answering RabbitMQ's 401, or 404 for a vhost the user has no
// permission in, when it fails.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, need rule) bool {
	u := requester(r)
	switch need {
	case anyManager:
		return true
	case vhostUser:
		if isAdmin(u) || s.mayUseVHost(r, u, r.PathValue("vhost")) {
			return true
		}
		writeError(w, http.StatusNotFound, "not_found", "Not Found")
	case monitor:
		if isMonitor(u) {
			return true
		}
		writeNotAuthorised(w, "Not monitor user")
	case policymaker:
		switch {
		case isAdmin(u):
			return true
		case !isPolicymaker(u):
			writeNotAuthorised(w, "User not authorised to access object")
		case s.mayUseVHost(r, u, r.PathValue("vhost")):
			return true
		default:
			writeError(w, http.StatusNotFound, "not_found", "Not Found")
		}
	case admin:
		if isAdmin(u) {
			return true
		}
		writeNotAuthorised(w, "Not administrator user")
	}
	return false
}

// mayUseVHost reports whether u may see a vhost's objects: it has a
// permission there. A vhost that does not exist is the handler's 404 to
// give; none in the path lets the handler filter (inVHosts). It looks
// for the vhost as the handler does (vhostNamed): one added on another
// node just now, which the handler finds, is checked here too.
func (s *Server) mayUseVHost(r *http.Request, u users.User, vhost string) bool {
	if vhost == "" {
		return true
	}
	if _, found := s.vhostNamed(r, vhost); !found {
		return true
	}
	ctx, cancel := s.lookupContext(r)
	defer cancel()
	return s.cfg.Access.HasVHostAccessContext(ctx, u.Name, vhost)
}

// visibleVHosts are the vhosts GET /api/vhosts shows r's user: all for
// administrators and monitoring users, else those it has a permission
// in.
func (s *Server) visibleVHosts(r *http.Request) []*mq.VHost {
	if isMonitor(requester(r)) {
		return s.allVHosts()
	}
	return s.accessibleVHosts(r)
}

// objectVHosts are the vhosts whose queues, exchanges, bindings,
// policies and consumers a listing without a {vhost} shows r's user:
// all for administrators, else those it has a permission in (monitoring
// users included, as in RabbitMQ).
func (s *Server) objectVHosts(r *http.Request) []*mq.VHost {
	if isAdmin(requester(r)) {
		return s.allVHosts()
	}
	return s.accessibleVHosts(r)
}

// accessibleVHosts are the vhosts r's user has a permission in. The
// checks that miss share one lookupWait: on a node cut off from the
// metadata quorum the first uses it up, and the others stand at once.
func (s *Server) accessibleVHosts(r *http.Request) []*mq.VHost {
	user, all := userOf(r), s.allVHosts()
	permitted := func() []*mq.VHost {
		return slices.DeleteFunc(slices.Clone(all), func(v *mq.VHost) bool {
			return !s.cfg.Access.HasVHostAccessHere(user, v.Name())
		})
	}
	// The vhosts the user has no permission in, found as this node
	// applied the permissions, are looked up again after one catch-up
	// for them all (catchUpOnce), not one each: a user shut out of many
	// vhosts would pay a metadata write per vhost per listing.
	seen := permitted()
	if len(seen) < len(all) && catchUpOnce(r) {
		ctx, cancel := s.lookupContext(r)
		defer cancel()
		if s.cfg.Access.CatchUp(ctx) {
			seen = permitted()
		}
	}
	return seen
}

// seesConnection reports whether u may see a connection (or its
// channels) of user owner: monitors see all, others their own.
func seesConnection(u users.User, owner string) bool { return isMonitor(u) || u.Name == owner }

// principal is the request's user acting in vhost, for the AMQP
// permission checks of a change.
func (s *Server) principal(r *http.Request, vhost string) *access.Principal {
	return s.cfg.Access.Principal(userOf(r), vhost)
}

// writeNotAuthorised is RabbitMQ's 401 for a user who logged in but may
// not do what it asked.
func writeNotAuthorised(w http.ResponseWriter, reason string) {
	writeError(w, http.StatusUnauthorized, "not_authorised", reason)
}
