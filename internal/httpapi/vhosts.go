package httpapi

import (
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
// all of them when there is none. ok false means a 404 was written.
func (s *Server) vhostsOf(w http.ResponseWriter, r *http.Request) (vs []*mq.VHost, ok bool) {
	name := r.PathValue("vhost")
	if name == "" {
		return s.allVHosts(), true
	}
	v, err := s.reg.VHost(name)
	if err != nil {
		writeNotFound(w)
		return nil, false
	}
	return []*mq.VHost{v}, true
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
	v, err := s.reg.VHost(r.PathValue("vhost"))
	if err != nil {
		writeNoVHost(w)
		return nil, false
	}
	return v, true
}

func vhostJSON(v *mq.VHost) map[string]any {
	var messages, ready, unacked int
	for _, q := range v.QueueDetails() {
		messages += q.Messages
		ready += q.MessagesReady
		unacked += q.MessagesUnacknowledged
	}
	return map[string]any{
		"name": v.Name(), "description": "", "tags": []string{}, "tracing": false,
		"metadata": map[string]any{"description": "", "tags": []string{}},
		"messages": messages, "messages_ready": ready, "messages_unacknowledged": unacked,
	}
}

// listVHosts is GET /api/vhosts.
func (s *Server) listVHosts(w http.ResponseWriter, r *http.Request) {
	var out []map[string]any
	for _, v := range s.allVHosts() {
		out = append(out, vhostJSON(v))
	}
	writeList(w, r, out)
}

// getVHost is GET /api/vhosts/{vhost}.
func (s *Server) getVHost(w http.ResponseWriter, r *http.Request) {
	if v, ok := s.vhostOf(w, r); ok {
		writeJSON(w, http.StatusOK, vhostJSON(v))
	}
}
