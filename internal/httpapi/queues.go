package httpapi

import (
	"errors"
	"net/http"

	"github.com/wharf-mq/wharf/internal/access"
	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/mq"
)

// queueJSON is a queue as /api/queues shows it: definition, depth with
// its rates, consumers and message_stats. A queue whose node gave no
// figures ("state": "down") has none, as RabbitMQ shows one whose node is
// down, rather than zeros that look true.
func (s *Server) queueJSON(vhost string, q mq.QueueStats) map[string]any {
	var policy any // null when no policy applies, as in RabbitMQ
	def := map[string]any{}
	if q.Policy != "" {
		policy, def = q.Policy, q.PolicyDefinition
	}
	obj := map[string]any{
		"name": q.Name, "vhost": vhost, "durable": q.Durable, "auto_delete": q.AutoDelete, "exclusive": q.Exclusive,
		"type": q.Type, "arguments": jsonTable(q.Args), "state": q.State, "node": s.nodeName(q.Node),
		"policy": policy, "operator_policy": nil, "effective_policy_definition": def, "exclusive_consumer_tag": nil,
	}
	s.putQuorumMembers(obj, q.QueueDetail)
	if q.State != "down" {
		obj["consumers"], obj["message_stats"] = q.Consumers, statsObject(q.MessageStats)
		putStats(obj, q.Depth)
	}
	return obj
}

// listQueues is GET /api/queues[/{vhost}]: every node's queues, the
// other nodes' transient and exclusive ones among them, but those of the
// nodes unansweredHeader names.
func (s *Server) listQueues(w http.ResponseWriter, r *http.Request) {
	vs, ok := s.vhostsOf(w, r)
	if !ok {
		return
	}
	all, unanswered := s.reg.QueueStats(r.Context(), vs)
	s.nameUnanswered(w, unanswered)
	out := []map[string]any{}
	for i, stats := range all {
		for _, q := range stats {
			out = append(out, s.queueJSON(vs[i].Name(), q))
		}
	}
	writeList(w, r, out)
}

// getQueue is GET /api/queues/{vhost}/{name}: the queue with its
// consumers, on every node.
func (s *Server) getQueue(w http.ResponseWriter, r *http.Request) {
	v, ok := s.vhostOf(w, r)
	if !ok {
		return
	}
	q, unanswered, err := v.QueueStatsOf(r.Context(), r.PathValue("name"))
	if err != nil {
		s.nameUnanswered(w, unanswered)
		writeNotFound(w)
		return
	}
	obj := s.queueJSON(v.Name(), q)
	consumers := []map[string]any{}
	for _, k := range s.consumers(w, r, v.Name(), q.Name) {
		consumers = append(consumers, s.consumerJSON(k))
	}
	obj["consumer_details"], obj["incoming"], obj["deliveries"] = consumers, []any{}, []any{}
	writeJSON(w, http.StatusOK, obj)
}

// queueBody is the body of PUT /api/queues/{vhost}/{name}.
type queueBody struct {
	Durable    flexBool       `json:"durable"`
	AutoDelete flexBool       `json:"auto_delete"`
	Arguments  map[string]any `json:"arguments"`
}

// putQueue is PUT /api/queues/{vhost}/{name}: it declares the queue (201)
// or checks an existing one is equivalent (204; 400 if not).
func (s *Server) putQueue(w http.ResponseWriter, r *http.Request) {
	v, ok := s.writeVHostOf(w, r)
	if !ok {
		return
	}
	var body queueBody
	if !decodeBody(w, r, &body, maxBodyBytes) {
		return
	}
	name := r.PathValue("name")
	existed := v.HasQueue(name)
	def := mq.QueueDef{Name: name, Durable: body.Durable.V, AutoDelete: body.AutoDelete.V, Args: tableOf(body.Arguments)}
	err := s.principal(r, v.Name()).DeclareQueue(name, false, def.Args, func() bool { return existed })
	if err == nil {
		_, err = v.DeclareQueue(def, false)
	}
	if err != nil {
		writeMQError(w, err)
		return
	}
	writeCreated(w, existed)
}

// writeCreated answers a PUT: 201 when it created the object, 204 when
// the object was there already.
func writeCreated(w http.ResponseWriter, existed bool) {
	if existed {
		w.WriteHeader(http.StatusNoContent)
	} else {
		w.WriteHeader(http.StatusCreated)
	}
}

// deleteQueue is DELETE /api/queues/{vhost}/{name}[?if-empty=true]
// [&if-unused=true]: 204, 404, or 400 when a condition does not hold.
func (s *Server) deleteQueue(w http.ResponseWriter, r *http.Request) {
	v, name, ok := s.existingQueue(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	err := s.principal(r, v.Name()).Delete(access.Queue, name)
	if err == nil {
		_, err = v.DeleteQueue(name, q.Get("if-unused") == "true", q.Get("if-empty") == "true", 0)
	}
	if err != nil {
		writeMQError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// purgeQueue is DELETE /api/queues/{vhost}/{name}/contents: the ready
// messages go.
func (s *Server) purgeQueue(w http.ResponseWriter, r *http.Request) {
	v, name, ok := s.existingQueue(w, r)
	if !ok {
		return
	}
	err := s.principal(r, v.Name()).ReadQueue(name)
	if err == nil {
		_, err = v.PurgeQueue(name, 0)
	}
	if err != nil {
		writeMQError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// existingQueue returns the vhost and name of the queue a request names,
// or answers 404.
func (s *Server) existingQueue(w http.ResponseWriter, r *http.Request) (*mq.VHost, string, bool) {
	v, ok := s.vhostOf(w, r)
	if !ok {
		return nil, "", false
	}
	name := r.PathValue("name")
	if _, err := v.QueueDetail(name); err != nil {
		writeNotFound(w)
		return nil, "", false
	}
	return v, name, true
}

// getBody is the body of POST /api/queues/{vhost}/{name}/get.
type getBody struct {
	Count    flexInt `json:"count"`
	Ackmode  string  `json:"ackmode"`
	Encoding string  `json:"encoding"`
	Truncate flexInt `json:"truncate"`
}

// getAckmodes maps each ackmode to whether messages are taken without ack
// and what happens to the others once read: put back (requeue) or
// dropped, and dead-lettered, like a rejection.
var getAckmodes = map[string]struct{ noAck, requeue bool }{
	"ack_requeue_true":     {requeue: true},
	"reject_requeue_true":  {requeue: true},
	"ack_requeue_false":    {noAck: true},
	"reject_requeue_false": {},
}

// getMessages is POST /api/queues/{vhost}/{name}/get: up to count
// messages from the head of the queue, as basic.get takes them, then
// requeued, acknowledged or rejected as ackmode says.
func (s *Server) getMessages(w http.ResponseWriter, r *http.Request) {
	v, ok := s.vhostOf(w, r)
	if !ok {
		return
	}
	var body getBody
	if !decodeBody(w, r, &body, maxBodyBytes) {
		return
	}
	if !requireKeys(w, key{"count", body.Count.Set}, key{"ackmode", body.Ackmode != ""}, key{"encoding", body.Encoding != ""}) {
		return
	}
	mode, known := getAckmodes[body.Ackmode]
	if !known {
		writeBadRequest(w, "unknown ackmode "+body.Ackmode)
		return
	}
	if body.Encoding != "auto" && body.Encoding != "base64" {
		writeFieldError(w, &fieldError{"unsupported_encoding", body.Encoding})
		return
	}
	name := r.PathValue("name")
	if err := s.principal(r, v.Name()).ReadQueue(name); err != nil {
		writeMQError(w, err)
		return
	}
	out := []map[string]any{}
	var taken []mq.QueueTag
	for range body.Count.V {
		d, ok, err := v.Get(name, mode.noAck, 0)
		if err != nil {
			settleGot(v, name, taken, mode.requeue)
			var we *amqpwire.Error
			if errors.As(err, &we) && we.Code == amqpwire.CodeNotFound {
				writeError(w, http.StatusNotFound, "not_found", we.Text) // with its code name, as RabbitMQ
				return
			}
			writeMQError(w, err)
			return
		}
		if !ok {
			break
		}
		if !mode.noAck {
			taken = append(taken, d.Tag)
		}
		payload, encoding := encodePayload(d.Message.Body, body.Encoding, body.Truncate.V)
		out = append(out, map[string]any{
			"payload_bytes": len(d.Message.Body), "redelivered": d.Redelivered,
			"exchange": d.Message.Exchange, "routing_key": d.Message.RoutingKey, "message_count": d.MessageCount,
			"properties": propertiesJSON(&d.Message.Properties), "payload": payload, "payload_encoding": encoding,
		})
	}
	settleGot(v, name, taken, mode.requeue)
	writeJSON(w, http.StatusOK, out)
}

// settleGot puts messages read by getMessages back, or rejects them.
func settleGot(v *mq.VHost, queue string, tags []mq.QueueTag, requeue bool) {
	if len(tags) == 0 {
		return
	}
	if requeue {
		v.Requeue(queue, tags...)
	} else {
		v.Discard(queue, tags...)
	}
}
