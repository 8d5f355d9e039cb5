package httpapi

import (
	"net/http"

	"github.com/wharf-mq/wharf/internal/mq"
)

// overview is GET /api/overview.
func (s *Server) overview(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"product_name":       "Wharf",
		"product_version":    s.cfg.Version,
		"management_version": s.cfg.Version,
		"rabbitmq_version":   s.cfg.Version,
		"cluster_name":       s.cfg.ClusterName,
		"node":               "wharf@" + s.cfg.ClusterName,
	})
}

// vhostsOf returns the vhosts a request names: the {vhost} path value, or
// all of them when there is none. ok false means a 404 was written.
func (s *Server) vhostsOf(w http.ResponseWriter, r *http.Request) (vs []*mq.VHost, ok bool) {
	if name := r.PathValue("vhost"); name != "" {
		v, err := s.reg.VHost(name)
		if err != nil {
			writeNotFound(w)
			return nil, false
		}
		return []*mq.VHost{v}, true
	}
	for _, name := range s.reg.VHosts() {
		if v, err := s.reg.VHost(name); err == nil {
			vs = append(vs, v)
		}
	}
	return vs, true
}

func vhostJSON(v *mq.VHost) map[string]any {
	var messages int
	for _, q := range v.Queues() {
		messages += q.Messages
	}
	return map[string]any{"name": v.Name(), "description": "", "tags": []string{}, "tracing": false, "messages_ready": messages}
}

// listVHosts is GET /api/vhosts.
func (s *Server) listVHosts(w http.ResponseWriter, r *http.Request) {
	vs, _ := s.vhostsOf(w, r)
	out := make([]map[string]any, 0, len(vs))
	for _, v := range vs {
		out = append(out, vhostJSON(v))
	}
	writeJSON(w, http.StatusOK, out)
}

// getVHost is GET /api/vhosts/{vhost}.
func (s *Server) getVHost(w http.ResponseWriter, r *http.Request) {
	if vs, ok := s.vhostsOf(w, r); ok {
		writeJSON(w, http.StatusOK, vhostJSON(vs[0]))
	}
}

func queueJSON(vhost string, q mq.QueueDetail) map[string]any {
	var policy any // null when no policy applies, as in RabbitMQ
	def := map[string]any{}
	if q.Policy != "" {
		policy, def = q.Policy, q.PolicyDefinition
	}
	return map[string]any{
		"name": q.Name, "vhost": vhost, "durable": q.Durable, "auto_delete": q.AutoDelete, "exclusive": q.Exclusive,
		"type": q.Type, "arguments": jsonTable(q.Args), "state": "running",
		"messages": q.Messages, "messages_ready": q.MessagesReady, "messages_unacknowledged": q.MessagesUnacknowledged,
		"consumers": q.Consumers, "policy": policy, "effective_policy_definition": def,
	}
}

// listQueues is GET /api/queues[/{vhost}].
func (s *Server) listQueues(w http.ResponseWriter, r *http.Request) {
	vs, ok := s.vhostsOf(w, r)
	if !ok {
		return
	}
	out := []map[string]any{}
	for _, v := range vs {
		for _, q := range v.QueueDetails() {
			out = append(out, queueJSON(v.Name(), q))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// getQueue is GET /api/queues/{vhost}/{name}.
func (s *Server) getQueue(w http.ResponseWriter, r *http.Request) {
	vs, ok := s.vhostsOf(w, r)
	if !ok {
		return
	}
	q, err := vs[0].QueueDetail(r.PathValue("name"))
	if err != nil {
		writeMQError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, queueJSON(vs[0].Name(), q))
}

func exchangeJSON(v *mq.VHost, x mq.ExchangeDef) map[string]any {
	out := map[string]any{
		"name": x.Name, "vhost": v.Name(), "type": x.Type, "durable": x.Durable, "auto_delete": x.AutoDelete,
		"internal": x.Internal, "arguments": jsonTable(x.Args),
	}
	if p, ok := v.ExchangePolicy(x.Name); ok && x.Name != "" {
		out["policy"] = p.Name
	}
	return out
}

// listExchanges is GET /api/exchanges[/{vhost}].
func (s *Server) listExchanges(w http.ResponseWriter, r *http.Request) {
	vs, ok := s.vhostsOf(w, r)
	if !ok {
		return
	}
	out := []map[string]any{}
	for _, v := range vs {
		for _, x := range v.Exchanges() {
			out = append(out, exchangeJSON(v, x))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// getExchange is GET /api/exchanges/{vhost}/{name}.
func (s *Server) getExchange(w http.ResponseWriter, r *http.Request) {
	vs, ok := s.vhostsOf(w, r)
	if !ok {
		return
	}
	name := r.PathValue("name")
	if name == "amq.default" {
		name = "" // the default exchange's name in the API
	}
	for _, x := range vs[0].Exchanges() {
		if x.Name == name {
			writeJSON(w, http.StatusOK, exchangeJSON(vs[0], x))
			return
		}
	}
	writeNotFound(w)
}

// listBindings is GET /api/bindings[/{vhost}]: the default exchange's
// implicit bindings (one per queue, by its name) first, as RabbitMQ lists
// them, then the declared ones.
func (s *Server) listBindings(w http.ResponseWriter, r *http.Request) {
	vs, ok := s.vhostsOf(w, r)
	if !ok {
		return
	}
	out := []map[string]any{}
	binding := func(v *mq.VHost, src, dst, dstType, key string, args map[string]any) map[string]any {
		pk := key
		if pk == "" {
			pk = "~"
		}
		return map[string]any{
			"source": src, "vhost": v.Name(), "destination": dst, "destination_type": dstType,
			"routing_key": key, "arguments": args, "properties_key": pk,
		}
	}
	for _, v := range vs {
		for _, q := range v.Queues() {
			out = append(out, binding(v, "", q.Name, "queue", q.Name, map[string]any{}))
		}
		for _, b := range v.Bindings() {
			kind := "queue"
			if b.ToExchange {
				kind = "exchange"
			}
			args := map[string]any{}
			for k, a := range b.Args {
				args[k] = jsonValue(a)
			}
			out = append(out, binding(v, b.Source, b.Destination, kind, b.Key, args))
		}
	}
	writeJSON(w, http.StatusOK, out)
}
