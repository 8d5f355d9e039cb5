package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/wharf-mq/wharf/internal/mq"
)

// listPolicies is GET /api/policies[/{vhost}].
func (s *Server) listPolicies(w http.ResponseWriter, r *http.Request) {
	vs, ok := s.vhostsOf(w, r)
	if !ok {
		return
	}
	out := []map[string]any{}
	for _, v := range vs {
		for _, p := range v.Policies() {
			out = append(out, policyJSON(p))
		}
	}
	writeList(w, r, out)
}

// policyJSON is a policy as the API shows it (mq.Policy's JSON form).
func policyJSON(p mq.Policy) map[string]any {
	return map[string]any{"vhost": p.VHost, "name": p.Name, "pattern": p.Pattern, "apply-to": p.ApplyTo,
		"definition": p.Definition, "priority": p.Priority}
}

// findPolicy returns the vhost's policy name, which may have been set on
// another node just now (lookedUp).
func (s *Server) findPolicy(r *http.Request, v *mq.VHost, name string) (mq.Policy, bool) {
	return lookedUp(s, r, func() (mq.Policy, bool) { return v.Policy(name) })
}

// getPolicy is GET /api/policies/{vhost}/{name}.
func (s *Server) getPolicy(w http.ResponseWriter, r *http.Request) {
	v, ok := s.vhostOf(w, r)
	if !ok {
		return
	}
	p, found := s.findPolicy(r, v, r.PathValue("name"))
	if !found {
		writeNotFound(w)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

// policyBody is the body of PUT /api/policies/{vhost}/{name}, as
// RabbitMQ takes it.
type policyBody struct {
	Pattern    *string        `json:"pattern"`
	Definition map[string]any `json:"definition"`
	Priority   json.Number    `json:"priority"`
	ApplyTo    string         `json:"apply-to"`
}

// putPolicy is PUT /api/policies/{vhost}/{name}: 201 when it creates the
// policy, 204 when it replaces one.
func (s *Server) putPolicy(w http.ResponseWriter, r *http.Request) {
	v, ok := s.writeVHostOf(w, r)
	if !ok {
		return
	}
	var body policyBody
	if !decodeBody(w, r, &body, maxBodyBytes) {
		return
	}
	if !requireKeys(w, key{"pattern", body.Pattern != nil}, key{"definition", body.Definition != nil}) {
		return
	}
	priority := 0
	if body.Priority != "" {
		n, err := body.Priority.Int64()
		if err != nil {
			writeBadRequest(w, "Validation failed\n\n"+string(body.Priority)+" is not a valid priority\n")
			return
		}
		priority = int(n)
	}
	name := r.PathValue("name")
	_, existed := v.Policy(name)
	err := v.SetPolicy(mq.Policy{Name: name, Pattern: *body.Pattern, ApplyTo: body.ApplyTo, Priority: priority, Definition: body.Definition})
	if err != nil {
		writeMQError(w, err)
		return
	}
	writeCreated(w, existed)
}

// deletePolicy is DELETE /api/policies/{vhost}/{name}: 204, or 404.
func (s *Server) deletePolicy(w http.ResponseWriter, r *http.Request) {
	v, ok := s.vhostOf(w, r)
	if !ok {
		return
	}
	name := r.PathValue("name")
	if _, found := s.findPolicy(r, v, name); !found {
		writeNotFound(w)
		return
	}
	if err := v.DeletePolicy(name); err != nil {
		writeMQError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
