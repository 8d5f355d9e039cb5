package httpapi

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/wharf-mq/wharf/internal/access"
	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/mq"
)

// destinationKind is a binding's destination_type, and its letter in
// binding paths.
func destinationKind(b mq.BindingInfo) (kind, letter string) {
	if b.ToExchange {
		return "exchange", "e"
	}
	return "queue", "q"
}

// propertiesKey identifies a binding among those between the same source
// and destination, as RabbitMQ's properties_key does: the routing key
// URL-encoded, and when there are arguments "~" and a short hash of them
// ("~" alone for an empty key without arguments). The hash is Wharf's
// own; clients only hand the key back.
func propertiesKey(key string, args map[string]any) string {
	pk := strings.ReplaceAll(url.QueryEscape(key), "~", "%7E")
	if len(args) == 0 {
		if pk == "" {
			return "~"
		}
		return pk
	}
	j, _ := json.Marshal(jsonTable(args))
	sum := sha256.Sum256(j)
	return pk + "~" + base64.RawURLEncoding.EncodeToString(sum[:])[:6]
}

func bindingJSON(vhost string, b mq.BindingInfo) map[string]any {
	kind, _ := destinationKind(b)
	return map[string]any{
		"source": b.Source, "vhost": vhost, "destination": b.Destination, "destination_type": kind,
		"routing_key": b.Key, "arguments": jsonTable(b.Args), "properties_key": propertiesKey(b.Key, b.Args),
	}
}

// selectBindings returns the bindings of the request's vhosts that keep
// selects, as JSON: every node's (mq.Registry.BindingsOf), but those of
// the nodes unansweredHeader names.
func (s *Server) selectBindings(w http.ResponseWriter, r *http.Request, keep func(mq.BindingInfo) bool) ([]map[string]any, bool) {
	vs, ok := s.vhostsOf(w, r)
	if !ok {
		return nil, false
	}
	all, unanswered := s.reg.BindingsOf(r.Context(), vs)
	s.nameUnanswered(w, unanswered)
	out := []map[string]any{}
	for i, v := range vs {
		for _, b := range all[i] {
			if keep(b) {
				out = append(out, bindingJSON(v.Name(), b))
			}
		}
	}
	return out, true
}

// writeBindings answers with the bindings of the request's vhosts that
// keep selects.
func (s *Server) writeBindings(w http.ResponseWriter, r *http.Request, keep func(mq.BindingInfo) bool) {
	if out, ok := s.selectBindings(w, r, keep); ok {
		writeList(w, r, out)
	}
}

// listBindings is GET /api/bindings[/{vhost}].
func (s *Server) listBindings(w http.ResponseWriter, r *http.Request) {
	s.writeBindings(w, r, func(mq.BindingInfo) bool { return true })
}

// listQueueBindings is GET /api/queues/{vhost}/{name}/bindings: 404 if
// no node has the queue, which every queue's implicit binding from the
// default exchange tells.
func (s *Server) listQueueBindings(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	out, ok := s.selectBindings(w, r, func(b mq.BindingInfo) bool { return !b.ToExchange && b.Destination == name })
	if !ok {
		return
	}
	if !slices.ContainsFunc(out, func(b map[string]any) bool { return b["source"] == "" }) {
		writeNotFound(w)
		return
	}
	writeList(w, r, out)
}

// listSourceBindings is GET /api/exchanges/{vhost}/{name}/bindings/source.
func (s *Server) listSourceBindings(w http.ResponseWriter, r *http.Request) {
	if name, ok := s.existingExchange(w, r); ok {
		s.writeBindings(w, r, func(b mq.BindingInfo) bool { return b.Source == name })
	}
}

// listDestinationBindings is GET
// /api/exchanges/{vhost}/{name}/bindings/destination.
func (s *Server) listDestinationBindings(w http.ResponseWriter, r *http.Request) {
	if name, ok := s.existingExchange(w, r); ok {
		s.writeBindings(w, r, func(b mq.BindingInfo) bool { return b.ToExchange && b.Destination == name })
	}
}

// existingExchange returns the name of the exchange a request names
// (this node's, or another node's transient one), or answers 404.
func (s *Server) existingExchange(w http.ResponseWriter, r *http.Request) (string, bool) {
	v, ok := s.vhostOf(w, r)
	if !ok {
		return "", false
	}
	name := exchangeName(r.PathValue("name"))
	if _, found := lookupExchange(v, name); found {
		return name, true
	}
	others, unanswered := s.reg.ExchangesElsewhere(r.Context(), v.Name(), name) // a transient one of another node
	if len(others) == 0 {
		s.nameUnanswered(w, unanswered)
		writeNotFound(w)
		return "", false
	}
	return name, true
}

// between selects the bindings from {source} to the {kind} ("q" or "e")
// {destination} of a binding path; false if kind is neither.
func between(r *http.Request) (func(mq.BindingInfo) bool, bool) {
	src, dst, letter := exchangeName(r.PathValue("source")), r.PathValue("destination"), r.PathValue("kind")
	if letter != "q" && letter != "e" {
		return nil, false
	}
	return func(b mq.BindingInfo) bool {
		_, l := destinationKind(b)
		return b.Source == src && b.Destination == dst && l == letter
	}, true
}

// listBindingsBetween is GET /api/bindings/{vhost}/e/{source}/{q|e}/{destination}.
func (s *Server) listBindingsBetween(w http.ResponseWriter, r *http.Request) {
	keep, ok := between(r)
	if !ok {
		writeNotFound(w)
		return
	}
	s.writeBindings(w, r, keep)
}

// findBinding returns the binding a full binding path names, or answers
// 404.
func (s *Server) findBinding(w http.ResponseWriter, r *http.Request) (*mq.VHost, mq.BindingInfo, bool) {
	keep, valid := between(r)
	if !valid {
		writeNotFound(w)
		return nil, mq.BindingInfo{}, false
	}
	v, ok := s.vhostOf(w, r)
	if !ok {
		return nil, mq.BindingInfo{}, false
	}
	for _, b := range v.AllBindings() {
		if keep(b) && propertiesKey(b.Key, b.Args) == r.PathValue("props") {
			return v, b, true
		}
	}
	writeNotFound(w)
	return nil, mq.BindingInfo{}, false
}

// getBinding is GET /api/bindings/{vhost}/e/{source}/{q|e}/{destination}/{props}.
func (s *Server) getBinding(w http.ResponseWriter, r *http.Request) {
	if v, b, ok := s.findBinding(w, r); ok {
		writeJSON(w, http.StatusOK, bindingJSON(v.Name(), b))
	}
}

// deleteBinding is DELETE /api/bindings/{vhost}/e/{source}/{q|e}/{destination}/{props}.
func (s *Server) deleteBinding(w http.ResponseWriter, r *http.Request) {
	v, b, ok := s.findBinding(w, r)
	if !ok {
		return
	}
	err := s.checkBind(r, v, b.ToExchange, b.Destination, b.Source, b.Key)
	switch {
	case err != nil:
	case b.ToExchange:
		err = v.UnbindExchange(b.Destination, b.Source, b.Key, amqpwire.Table(b.Args))
	default:
		err = v.UnbindQueue(b.Destination, b.Source, b.Key, amqpwire.Table(b.Args), 0)
	}
	if err != nil {
		writeMQError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// bindingBody is the body of POST /api/bindings/{vhost}/e/{source}/{q|e}/{destination}.
type bindingBody struct {
	RoutingKey string         `json:"routing_key"`
	Arguments  map[string]any `json:"arguments"`
}

// createBinding is POST /api/bindings/{vhost}/e/{source}/{q|e}/{destination}:
// 201 with the new binding's path, relative, in Location (binding twice
// is not an error).
func (s *Server) createBinding(w http.ResponseWriter, r *http.Request) {
	v, ok := s.writeVHostOf(w, r)
	if !ok {
		return
	}
	if _, valid := between(r); !valid {
		writeNotFound(w)
		return
	}
	var body bindingBody
	if !decodeBody(w, r, &body, maxBodyBytes) {
		return
	}
	src, dst, args := exchangeName(r.PathValue("source")), r.PathValue("destination"), tableOf(body.Arguments)
	toExchange := r.PathValue("kind") == "e"
	err := s.checkBind(r, v, toExchange, dst, src, body.RoutingKey)
	switch {
	case err != nil:
	case toExchange:
		err = v.BindExchange(dst, src, body.RoutingKey, args)
	default:
		err = v.BindQueue(dst, src, body.RoutingKey, args, 0)
	}
	if err != nil {
		writeMQError(w, err)
		return
	}
	w.Header().Set("Location", url.PathEscape(dst)+"/"+propertiesKey(body.RoutingKey, args))
	w.WriteHeader(http.StatusCreated)
}

// checkBind checks the user's AMQP permissions for a bind or unbind.
func (s *Server) checkBind(r *http.Request, v *mq.VHost, toExchange bool, destination, source, key string) error {
	kind := access.Queue
	if toExchange {
		kind = access.Exchange
	}
	return s.principal(r, v.Name()).Bind(kind, destination, source, key, func() bool { return v.IsTopicExchange(source) })
}
