package httpapi

import (
	"errors"
	"net/http"

	"github.com/wharf-mq/wharf/internal/access"
)

// Permissions and topic permissions, as RabbitMQ's API shapes them; only
// administrators reach these endpoints (routes.go).

// listPermissions is GET /api/permissions, /api/vhosts/{vhost}/permissions
// and /api/users/{user}/permissions.
func (s *Server) listPermissions(w http.ResponseWriter, r *http.Request) {
	vhost, user, ok := s.permissionScope(w, r)
	if !ok {
		return
	}
	var out []map[string]any
	for _, p := range s.cfg.Access.Permissions() {
		if (vhost == "" || p.VHost == vhost) && (user == "" || p.User == user) {
			out = append(out, permissionJSON(p))
		}
	}
	writeList(w, r, out)
}

// listTopicPermissions is GET /api/topic-permissions[/{vhost}/{user}],
// /api/vhosts/{vhost}/topic-permissions and
// /api/users/{user}/topic-permissions.
func (s *Server) listTopicPermissions(w http.ResponseWriter, r *http.Request) {
	vhost, user, ok := s.permissionScope(w, r)
	if !ok {
		return
	}
	var out []map[string]any
	for _, p := range s.cfg.Access.TopicPermissions() {
		if (vhost == "" || p.VHost == vhost) && (user == "" || p.User == user) {
			out = append(out, topicPermissionJSON(p))
		}
	}
	writeList(w, r, out)
}

// permissionScope is the vhost and user a listing is narrowed to ("":
// any), answering 404 when one it names does not exist.
func (s *Server) permissionScope(w http.ResponseWriter, r *http.Request) (vhost, user string, ok bool) {
	vhost, user = r.PathValue("vhost"), r.PathValue("user")
	if vhost != "" {
		if _, found := s.vhostNamed(r, vhost); !found {
			writeNotFound(w)
			return "", "", false
		}
	}
	if user != "" {
		if !s.knownUser(r, user) {
			writeNotFound(w)
			return "", "", false
		}
	}
	return vhost, user, true
}

func permissionJSON(p access.Permission) map[string]any {
	return map[string]any{"user": p.User, "vhost": p.VHost, "configure": p.Configure, "write": p.Write, "read": p.Read}
}

func topicPermissionJSON(p access.TopicPermission) map[string]any {
	return map[string]any{"user": p.User, "vhost": p.VHost, "exchange": p.Exchange, "write": p.Write, "read": p.Read}
}

// getPermission is GET /api/permissions/{vhost}/{user}.
func (s *Server) getPermission(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.lookupContext(r)
	defer cancel()
	p, ok := s.cfg.Access.PermissionContext(ctx, r.PathValue("user"), r.PathValue("vhost"))
	if !ok {
		writeNotFound(w)
		return
	}
	writeJSON(w, http.StatusOK, permissionJSON(p))
}

// permissionBody is the body of PUT /api/permissions/{vhost}/{user}, and
// with exchange of PUT /api/topic-permissions/{vhost}/{user}.
type permissionBody struct {
	Exchange  *string `json:"exchange"`
	Configure *string `json:"configure"`
	Write     *string `json:"write"`
	Read      *string `json:"read"`
}

// putPermission is PUT /api/permissions/{vhost}/{user}: 201 for a new
// permission, 204 for a changed one.
func (s *Server) putPermission(w http.ResponseWriter, r *http.Request) {
	var body permissionBody
	if !decodeBody(w, r, &body, maxBodyBytes) {
		return
	}
	if !requireKeys(w, key{"configure", body.Configure != nil}, key{"write", body.Write != nil}, key{"read", body.Read != nil}) {
		return
	}
	vhost, user, ok := s.permissionSubject(w, r)
	if !ok {
		return
	}
	_, existed := s.cfg.Access.Permission(user, vhost)
	err := s.cfg.Access.SetPermission(access.Permission{User: user, VHost: vhost,
		Configure: *body.Configure, Write: *body.Write, Read: *body.Read})
	if err != nil {
		writeAccessError(w, err)
		return
	}
	writeCreated(w, existed)
}

// permissionSubject is the vhost and user a permission is set for,
// answering RabbitMQ's 400 when either does not exist.
func (s *Server) permissionSubject(w http.ResponseWriter, r *http.Request) (vhost, user string, ok bool) {
	vhost, user = r.PathValue("vhost"), r.PathValue("user")
	_, found := s.vhostNamed(r, vhost)
	if !found || !s.knownUser(r, user) {
		writeBadRequest(w, "vhost_or_user_not_found")
		return "", "", false
	}
	return vhost, user, true
}

// deletePermission is DELETE /api/permissions/{vhost}/{user}.
func (s *Server) deletePermission(w http.ResponseWriter, r *http.Request) {
	if err := s.cfg.Access.DeletePermission(r.PathValue("user"), r.PathValue("vhost")); err != nil {
		writeAccessError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// putTopicPermission is PUT /api/topic-permissions/{vhost}/{user}, for
// the exchange the body names: 201 for a new one, 204 for a changed one.
func (s *Server) putTopicPermission(w http.ResponseWriter, r *http.Request) {
	var body permissionBody
	if !decodeBody(w, r, &body, maxBodyBytes) {
		return
	}
	if !requireKeys(w, key{"exchange", body.Exchange != nil}, key{"write", body.Write != nil}, key{"read", body.Read != nil}) {
		return
	}
	vhost, user, ok := s.permissionSubject(w, r)
	if !ok {
		return
	}
	existed := false
	for _, p := range s.cfg.Access.TopicPermissions() {
		existed = existed || p.User == user && p.VHost == vhost && p.Exchange == *body.Exchange
	}
	err := s.cfg.Access.SetTopicPermission(access.TopicPermission{User: user, VHost: vhost, Exchange: *body.Exchange,
		Write: *body.Write, Read: *body.Read})
	if err != nil {
		writeAccessError(w, err)
		return
	}
	writeCreated(w, existed)
}

// deleteTopicPermissions is DELETE /api/topic-permissions/{vhost}/{user}:
// every topic permission of the user in the vhost.
func (s *Server) deleteTopicPermissions(w http.ResponseWriter, r *http.Request) {
	if err := s.cfg.Access.DeleteTopicPermissions(r.PathValue("user"), r.PathValue("vhost"), ""); err != nil {
		writeAccessError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// writeAccessError answers a permission store error.
func writeAccessError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, access.ErrNotFound):
		writeNotFound(w)
	case errors.Is(err, access.ErrInvalidRegexp), errors.Is(err, access.ErrNoExchange):
		writeBadRequest(w, err.Error())
	default:
		writeError(w, http.StatusInternalServerError, "internal_server_error", err.Error())
	}
}

// knownUser reports whether user exists, catching up lookupWait at most
// when this node does not know it.
func (s *Server) knownUser(r *http.Request, user string) bool {
	ctx, cancel := s.lookupContext(r)
	defer cancel()
	_, known := s.cfg.Users.GetContext(ctx, user)
	return known
}
