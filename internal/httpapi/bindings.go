package httpapi

import (
	"cmp"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
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

// selectBindings returns the bindings of vs that keep selects, as JSON:
// every node's (mq.Registry.BindingsOf), but those of the nodes
// unansweredHeader names.
func (s *Server) selectBindings(w http.ResponseWriter, r *http.Request, vs []*mq.VHost, keep func(mq.BindingInfo) bool) []map[string]any {
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
	return out
}

// writeBindings answers with the bindings of the request's vhosts that
// keep selects.
func (s *Server) writeBindings(w http.ResponseWriter, r *http.Request, keep func(mq.BindingInfo) bool) {
	if vs, ok := s.vhostsOf(w, r); ok {
		writeList(w, r, s.selectBindings(w, r, vs, keep))
	}
}

// listBindings is GET /api/bindings[/{vhost}].
func (s *Server) listBindings(w http.ResponseWriter, r *http.Request) {
	s.writeBindings(w, r, func(mq.BindingInfo) bool { return true })
}

// listQueueBindings is GET /api/queues/{vhost}/{name}/bindings: 404 if
// no node has the queue, which every queue's implicit binding from the
// default exchange tells, even once caught up with the cluster (the
// queue may have been declared on another node just now: lookedUp).
func (s *Server) listQueueBindings(w http.ResponseWriter, r *http.Request) {
	v, ok := s.vhostOf(w, r)
	if !ok {
		return
	}
	name := r.PathValue("name")
	out, found := lookedUp(s, r, func() ([]map[string]any, bool) {
		out := s.selectBindings(w, r, []*mq.VHost{v}, func(b mq.BindingInfo) bool { return !b.ToExchange && b.Destination == name })
		return out, slices.ContainsFunc(out, func(b map[string]any) bool { return b["source"] == "" })
	})
	if !found {
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
	if _, found := s.findExchange(r, v, name); found {
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

// findBinding returns the binding a full binding path names, and the
// node that alone has it (0: this node, and every node if it is in the
// definition store), or answers 404. It answers as RabbitMQ's, whose
// bindings are in one schema store, on any node: it first catches up
// with the cluster (this node may not have applied a binding made or
// deleted on another node just now), and finds a binding only another
// node has (from or to its transient exchange or queue) by asking it.
func (s *Server) findBinding(w http.ResponseWriter, r *http.Request) (*mq.VHost, mq.BindingInfo, int32, bool) {
	keep, valid := between(r)
	if !valid {
		writeNotFound(w)
		return nil, mq.BindingInfo{}, 0, false
	}
	v, ok := s.vhostOf(w, r)
	if !ok {
		return nil, mq.BindingInfo{}, 0, false
	}
	props := r.PathValue("props")
	named := func(b mq.BindingInfo) bool { return keep(b) && propertiesKey(b.Key, b.Args) == props }
	s.reg.CatchUpWithin(s.lookupWait)
	if b, found := localBinding(v, named); found {
		return v, b, 0, true
	}
	others, unanswered := s.reg.BindingsElsewhere(r.Context(), v.Name())
	slices.SortFunc(others, func(a, b mq.NodeBinding) int { return cmp.Compare(a.Node, b.Node) })
	for _, o := range others {
		if o.VHost == v.Name() && named(o.BindingInfo) {
			return v, o.BindingInfo, o.Node, true
		}
	}
	s.nameUnanswered(w, unanswered)
	writeNotFound(w)
	return nil, mq.BindingInfo{}, 0, false
}

// localBinding returns the binding of v's (AllBindings) that named
// selects.
func localBinding(v *mq.VHost, named func(mq.BindingInfo) bool) (mq.BindingInfo, bool) {
	all := v.AllBindings()
	if i := slices.IndexFunc(all, named); i >= 0 {
		return all[i], true
	}
	return mq.BindingInfo{}, false
}

// getBinding is GET /api/bindings/{vhost}/e/{source}/{q|e}/{destination}/{props}.
func (s *Server) getBinding(w http.ResponseWriter, r *http.Request) {
	if v, b, _, ok := s.findBinding(w, r); ok {
		writeJSON(w, http.StatusOK, bindingJSON(v.Name(), b))
	}
}

// deleteBinding is DELETE /api/bindings/{vhost}/e/{source}/{q|e}/{destination}/{props},
// on whichever node has the binding: 503 if the node that alone has it
// does not answer.
func (s *Server) deleteBinding(w http.ResponseWriter, r *http.Request) {
	v, b, node, ok := s.findBinding(w, r)
	if !ok {
		return
	}
	err := s.checkBind(r, v, b.ToExchange, b.Destination, b.Source, b.Key)
	switch {
	case err != nil:
	case node != 0:
		var had bool
		if had, err = s.reg.UnbindOn(r.Context(), node, v.Name(), b); err == nil && !had {
			writeNotFound(w) // gone since it was looked up
			return
		}
	case b.ToExchange:
		err = v.UnbindExchange(b.Destination, b.Source, b.Key, amqpwire.Table(b.Args))
	default:
		err = v.UnbindQueue(b.Destination, b.Source, b.Key, amqpwire.Table(b.Args), 0)
	}
	switch {
	case errors.Is(err, mq.ErrNodeUnanswered):
		s.nameUnanswered(w, []int32{node})
		writeError(w, http.StatusServiceUnavailable, "node_unavailable", fmt.Sprintf("node %s did not answer", s.nodeName(node)))
	case err != nil:
		writeMQError(w, err)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
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
	return s.principal(r, v.Name()).Bind(kind, destination, source, key, func() bool { return s.isTopicExchange(r, v, source) })
}

// isTopicExchange reports whether the exchange name is a topic exchange:
// this node's, or another node's transient one (the source of a binding
// only that node has, which deleteBinding deletes there).
func (s *Server) isTopicExchange(r *http.Request, v *mq.VHost, name string) bool {
	if v.HasExchange(name) {
		return v.IsTopicExchange(name)
	}
	others, _ := s.reg.ExchangesElsewhere(r.Context(), v.Name(), name)
	return slices.ContainsFunc(others, func(x mq.NodeExchange) bool { return x.Type == "topic" })
}
