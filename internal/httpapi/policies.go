package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/wharf-mq/wharf/internal/mq"
)

// listPolicies is GET /api/policies[/{vhost}].
func (s *Server) listPolicies(w http.ResponseWriter, r *http.Request) {
	vs, ok := s.vhostsOf(w, r)
	if !ok {
		return
	}
	out := []mq.Policy{}
	for _, v := range vs {
		out = append(out, v.Policies()...)
	}
	writeJSON(w, http.StatusOK, out)
}

// getPolicy is GET /api/policies/{vhost}/{name}.
func (s *Server) getPolicy(w http.ResponseWriter, r *http.Request) {
	vs, ok := s.vhostsOf(w, r)
	if !ok {
		return
	}
	p, found := vs[0].Policy(r.PathValue("name"))
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
	v, err := s.reg.VHost(r.PathValue("vhost"))
	if err != nil {
		// RabbitMQ names the missing vhost when a write needs it, where a
		// read gets the plain 404 (writeNotFound).
		writeError(w, http.StatusNotFound, "not_found", "vhost_not_found")
		return
	}
	var body policyBody
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.UseNumber()
	if err := dec.Decode(&body); err != nil {
		writeBadRequest(w, "failed_to_parse_json: "+err.Error())
		return
	}
	var missing []string
	if body.Pattern == nil {
		missing = append(missing, "pattern")
	}
	if body.Definition == nil {
		missing = append(missing, "definition")
	}
	if len(missing) > 0 {
		writeBadRequest(w, "[{key_missing,"+strings.Join(missing, "},{key_missing,")+"}]")
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
	err = v.SetPolicy(mq.Policy{Name: name, Pattern: *body.Pattern, ApplyTo: body.ApplyTo, Priority: priority, Definition: body.Definition})
	if err != nil {
		writeMQError(w, err)
		return
	}
	if existed {
		w.WriteHeader(http.StatusNoContent)
	} else {
		w.WriteHeader(http.StatusCreated)
	}
}

// deletePolicy is DELETE /api/policies/{vhost}/{name}: 204, or 404.
func (s *Server) deletePolicy(w http.ResponseWriter, r *http.Request) {
	vs, ok := s.vhostsOf(w, r)
	if !ok {
		return
	}
	if err := vs[0].DeletePolicy(r.PathValue("name")); err != nil {
		writeMQError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
