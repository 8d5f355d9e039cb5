package httpapi

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/wharf-mq/wharf/internal/access"
	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/mq"
)

// exchangeName is the exchange a path names: the default exchange's name
// is "" but the API calls it amq.default.
func exchangeName(pathName string) string {
	if pathName == "amq.default" {
		return ""
	}
	return pathName
}

// lookupExchange returns the named exchange's definition.
func lookupExchange(v *mq.VHost, name string) (mq.ExchangeDef, bool) {
	for _, x := range v.Exchanges() {
		if x.Name == name {
			return x, true
		}
	}
	return mq.ExchangeDef{}, false
}

// findExchange is lookupExchange of an exchange that may have been
// declared on another node just now (lookedUp).
func (s *Server) findExchange(r *http.Request, v *mq.VHost, name string) (mq.ExchangeDef, bool) {
	return lookedUp(s, r, func() (mq.ExchangeDef, bool) { return lookupExchange(v, name) })
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

// listExchanges is GET /api/exchanges[/{vhost}]: every node's exchanges,
// the other nodes' transient ones among them (only the node that declared
// one has it), but those of the nodes unansweredHeader names.
func (s *Server) listExchanges(w http.ResponseWriter, r *http.Request) {
	vs, ok := s.vhostsOf(w, r)
	if !ok {
		return
	}
	all, unanswered := s.reg.ExchangesOf(r.Context(), vs)
	s.nameUnanswered(w, unanswered)
	out := []map[string]any{}
	for i, v := range vs {
		for _, x := range all[i] {
			out = append(out, exchangeJSON(v, x))
		}
	}
	writeList(w, r, out)
}

// getExchange is GET /api/exchanges/{vhost}/{name}: this node's exchange
// (once caught up with the cluster, if need be: findExchange), or
// another node's transient one.
func (s *Server) getExchange(w http.ResponseWriter, r *http.Request) {
	v, ok := s.vhostOf(w, r)
	if !ok {
		return
	}
	name := exchangeName(r.PathValue("name"))
	x, found := s.findExchange(r, v, name)
	if !found {
		others, unanswered := s.reg.ExchangesElsewhere(r.Context(), v.Name(), name)
		if len(others) == 0 {
			s.nameUnanswered(w, unanswered)
			writeNotFound(w)
			return
		}
		// The lowest node's, should two have one of that name.
		x = slices.MinFunc(others, func(a, b mq.NodeExchange) int { return cmp.Compare(a.Node, b.Node) }).ExchangeDef
	}
	obj := exchangeJSON(v, x)
	obj["incoming"], obj["outgoing"] = []any{}, []any{}
	writeJSON(w, http.StatusOK, obj)
}

// exchangeBody is the body of PUT /api/exchanges/{vhost}/{name}.
type exchangeBody struct {
	Type       string         `json:"type"`
	Durable    flexBool       `json:"durable"`
	AutoDelete flexBool       `json:"auto_delete"`
	Internal   flexBool       `json:"internal"`
	Arguments  map[string]any `json:"arguments"`
}

// putExchange is PUT /api/exchanges/{vhost}/{name}: it declares the
// exchange (201; type direct if none is given) or checks an existing one
// is equivalent (204; 400 if not).
func (s *Server) putExchange(w http.ResponseWriter, r *http.Request) {
	v, ok := s.writeVHostOf(w, r)
	if !ok {
		return
	}
	var body exchangeBody
	if !decodeBody(w, r, &body, maxBodyBytes) {
		return
	}
	if body.Type == "" {
		body.Type = "direct"
	}
	name := exchangeName(r.PathValue("name"))
	_, existed := lookupExchange(v, name)
	def := mq.ExchangeDef{Name: name, Type: body.Type, Durable: body.Durable.V, AutoDelete: body.AutoDelete.V,
		Internal: body.Internal.V, Args: tableOf(body.Arguments)}
	err := s.principal(r, v.Name()).DeclareExchange(name, false, def.Args, func() bool { return existed })
	if err == nil {
		err = v.DeclareExchange(def, false)
	}
	if err != nil {
		writeMQError(w, err)
		return
	}
	writeCreated(w, existed)
}

// deleteExchange is DELETE /api/exchanges/{vhost}/{name}[?if-unused=true]
// (of one declared on another node just now too: findExchange).
func (s *Server) deleteExchange(w http.ResponseWriter, r *http.Request) {
	v, ok := s.vhostOf(w, r)
	if !ok {
		return
	}
	name := exchangeName(r.PathValue("name"))
	if _, found := s.findExchange(r, v, name); !found {
		writeNotFound(w)
		return
	}
	err := s.principal(r, v.Name()).Delete(access.Exchange, name)
	if err == nil {
		err = v.DeleteExchange(name, r.URL.Query().Get("if-unused") == "true")
	}
	if err != nil {
		writeMQError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// publishBody is the body of POST /api/exchanges/{vhost}/{name}/publish.
type publishBody struct {
	RoutingKey      *string            `json:"routing_key"`
	Properties      *publishProperties `json:"properties"`
	Payload         *string            `json:"payload"`
	PayloadEncoding *string            `json:"payload_encoding"`
}

// publish is POST /api/exchanges/{vhost}/{name}/publish: the message is
// routed as basic.publish routes it and, as RabbitMQ's API does with a
// publisher confirm, answered once it is safe: {"routed": true} if it
// reached a queue.
func (s *Server) publish(w http.ResponseWriter, r *http.Request) {
	v, ok := s.vhostOf(w, r)
	if !ok {
		return
	}
	var body publishBody
	if !decodeBody(w, r, &body, maxPublishBytes) {
		return
	}
	if !requireKeys(w, key{"routing_key", body.RoutingKey != nil}, key{"properties", body.Properties != nil},
		key{"payload", body.Payload != nil}, key{"payload_encoding", body.PayloadEncoding != nil}) {
		return
	}
	payload, fe := decodePayload(*body.Payload, *body.PayloadEncoding)
	if fe != nil {
		writeFieldError(w, fe)
		return
	}
	props := body.Properties.wireProperties()
	if user := userOf(r); props.UserID != "" && props.UserID != user {
		writeBadRequest(w, fmt.Sprintf("406 PRECONDITION_FAILED - user_id property set to '%s' but authenticated user was '%s'",
			props.UserID, user))
		return
	}
	msg := &mq.Message{Exchange: exchangeName(r.PathValue("name")), RoutingKey: *body.RoutingKey, Properties: props, Body: payload}
	if err := s.principal(r, v.Name()).Publish(msg.Exchange, msg.RoutingKeys, func() bool { return v.IsTopicExchange(msg.Exchange) }); err != nil {
		writeMQError(w, err)
		return
	}
	res, err := v.Publish(msg)
	if err == nil && res.Durable.Pending() {
		select {
		case <-res.Durable.Done():
			err = res.Durable.Err()
		case <-r.Context().Done():
			return // the client left; the message stays published
		}
	}
	var we *amqpwire.Error
	switch {
	case errors.As(err, &we) && we.Code != amqpwire.CodeInternalError:
		writeBadRequest(w, fmt.Sprintf("%d %s", we.Code, we.Text)) // with its code, as RabbitMQ
	case err != nil:
		writeError(w, http.StatusInternalServerError, "internal_server_error", err.Error())
	case res.Rejected > 0:
		writeBadRequest(w, "Unable to publish message. Check queue limits.")
	default:
		writeJSON(w, http.StatusOK, map[string]any{"routed": res.Routed > 0})
	}
}
