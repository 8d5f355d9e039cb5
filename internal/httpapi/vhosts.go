package httpapi

import (
	"fmt"
	"net/http"

	"github.com/wharf-mq/wharf/internal/mq"
)

// allVHosts returns every vhost, sorted by name.
func (s *Server) allVHosts() []*mq.VHost {
	var vs []*mq.VHost
	for _, name := range s.reg.VHosts() {
		if v, err := s.reg.VHost(name); err == nil {
			vs = append(vs, v)
		}
	}
	return vs
}

// vhostsOf returns the vhosts a request names: the {vhost} path value, or
// when there is none all of those whose objects the user may see. ok
// false means a 404 was written.
func (s *Server) vhostsOf(w http.ResponseWriter, r *http.Request) (vs []*mq.VHost, ok bool) {
	name := r.PathValue("vhost")
	if name == "" {
		return s.objectVHosts(r), true
	}
	v, found := s.vhostNamed(r, name)
	if !found {
		writeNotFound(w)
		return nil, false
	}
	return []*mq.VHost{v}, true
}

// vhostNamed returns the vhost name, which may have been added on
// another node just now (lookedUp).
func (s *Server) vhostNamed(r *http.Request, name string) (*mq.VHost, bool) {
	return lookedUp(s, r, func() (*mq.VHost, bool) {
		v, err := s.reg.VHost(name)
		return v, err == nil
	})
}

// vhostOf is vhostsOf for an endpoint that names one vhost.
func (s *Server) vhostOf(w http.ResponseWriter, r *http.Request) (*mq.VHost, bool) {
	vs, ok := s.vhostsOf(w, r)
	if !ok {
		return nil, false
	}
	return vs[0], true
}

// writeVHostOf is vhostOf for a write: a missing vhost is RabbitMQ's
// "vhost_not_found".
func (s *Server) writeVHostOf(w http.ResponseWriter, r *http.Request) (*mq.VHost, bool) {
	v, found := s.vhostNamed(r, r.PathValue("vhost"))
	if !found {
		writeNoVHost(w)
		return nil, false
	}
	return v, true
}

// vhostJSON is a vhost as /api/vhosts shows it, with the depths of its
// queues (t, as the nodes serving them count them) summed.
func vhostJSON(v *mq.VHost, t mq.VHostTotals) map[string]any {
	return map[string]any{
		"name": v.Name(), "description": "", "tags": []string{}, "tracing": false,
		"metadata": map[string]any{"description": "", "tags": []string{}},
		"messages": t.Messages, "messages_ready": t.Ready, "messages_unacknowledged": t.Unacked,
	}
}

// listVHosts is GET /api/vhosts: those the user may see.
func (s *Server) listVHosts(w http.ResponseWriter, r *http.Request) {
	vs := s.visibleVHosts(r)
	totals, unanswered := s.reg.Totals(r.Context(), vs)
	s.nameUnanswered(w, unanswered)
	var out []map[string]any
	for i, t := range totals {
		out = append(out, vhostJSON(vs[i], t))
	}
	writeList(w, r, out)
}

// getVHost is GET /api/vhosts/{vhost}.
func (s *Server) getVHost(w http.ResponseWriter, r *http.Request) {
	if v, ok := s.vhostOf(w, r); ok {
		totals, unanswered := s.reg.Totals(r.Context(), []*mq.VHost{v})
		s.nameUnanswered(w, unanswered)
		writeJSON(w, http.StatusOK, vhostJSON(v, totals[0]))
	}
}

// putVHost is PUT /api/vhosts/{vhost}: 201 with a new vhost, whose
// creator gets every permission in it, as in RabbitMQ; 204 when it
// exists, added on another node just now too (vhostNamed: a creation
// pays that barrier, or a second PUT through another node would grant
// its caller every permission again). The body's description, tags and
// default queue type are not kept.
func (s *Server) putVHost(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	if r.ContentLength != 0 && !decodeBody(w, r, &body, maxBodyBytes) {
		return
	}
	name := r.PathValue("vhost")
	if _, found := s.vhostNamed(r, name); found {
		writeCreated(w, true)
		return
	}
	if _, err := s.reg.AddVHost(name); err != nil {
		writeMQError(w, err)
		return
	}
	if err := s.cfg.Access.GrantAll(userOf(r), name); err != nil {
		writeError(w, http.StatusInternalServerError, "internal_server_error", err.Error())
		return
	}
	writeCreated(w, false)
}

// deleteVHost is DELETE /api/vhosts/{vhost}, as RabbitMQ deletes one:
// its permissions go first, so no new connection gets in, then its
// connections are closed (320 CONNECTION_FORCED "vhost 'v' is deleted")
// and its queues, exchanges and policies deleted.
func (s *Server) deleteVHost(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("vhost")
	if _, found := s.vhostNamed(r, name); !found {
		writeNotFound(w)
		return
	}
	if err := s.cfg.Access.ForgetVHost(name); err != nil {
		writeError(w, http.StatusInternalServerError, "internal_server_error", err.Error())
		return
	}
	s.amqp.CloseVHostConnections(name, fmt.Sprintf("vhost '%s' is deleted", name))
	if err := s.reg.DeleteVHost(name); err != nil {
		writeMQError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
