package httpapi

import (
	"errors"
	"fmt"
	"maps"
	"net/http"

	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/mq"
)

// replayBody is the body of POST .../replay-dead-letters.
type replayBody struct {
	// Count bounds the messages looked at (default: those ready when the
	// call starts).
	Count flexInt `json:"count"`
}

// replayResult is what a replay did: messages moved back, messages left
// because they never died, messages left because their publish failed
// (with the first reason).
type replayResult struct {
	Moved  int    `json:"moved"`
	Kept   int    `json:"kept"`
	Failed int    `json:"failed"`
	Reason string `json:"reason,omitempty"`
}

// replayDeadLetters is POST /api/queues/{vhost}/{name}/replay-dead-letters,
// Wharf's own: what a RabbitMQ user does with a shovel from a dead-letter
// queue back to the original exchange, in one call. Each ready message
// that was dead-lettered is published again to the exchange it was first
// published to, with the routing keys it had then (mq.DeadLetterOrigin),
// and acknowledged only once that publish is safe: routed, and fsynced
// when it went to a durable queue. A publish that fails, or routes
// nowhere, leaves the message in this queue, so nothing is lost; at worst
// (a crash between publish and ack) a message is in both places, as with
// a shovel. Messages that never died stay. Only the messages ready when
// the call starts are looked at, so a replay that routes back into the
// same queue ends.
func (s *Server) replayDeadLetters(w http.ResponseWriter, r *http.Request) {
	v, name, ok := s.existingQueue(w, r)
	if !ok {
		return
	}
	var body replayBody
	if !decodeBody(w, r, &body, maxBodyBytes) {
		return
	}
	q, err := v.QueueDetail(name)
	if err != nil {
		writeMQError(w, err)
		return
	}
	budget := q.MessagesReady
	if body.Count.Set {
		budget = min(budget, int(max(body.Count.V, 0)))
	}
	var res replayResult
	var left []mq.QueueTag // taken and to be put back
	defer func() { settleGot(v, name, left, true) }()
	for range budget {
		d, got, err := v.Get(name, false, 0)
		if err != nil {
			writeMQError(w, err)
			return
		}
		if !got {
			break
		}
		exchange, keys, died := mq.DeadLetterOrigin(d.Message)
		if !died {
			left = append(left, d.Tag)
			res.Kept++
			continue
		}
		if err := republish(v, d.Message, exchange, keys); err != nil {
			left = append(left, d.Tag)
			res.Failed++
			if res.Reason == "" {
				res.Reason = err.Error()
			}
			continue
		}
		if err := v.Ack(name, d.Tag); err != nil {
			writeMQError(w, err)
			return
		}
		res.Moved++
	}
	writeJSON(w, http.StatusOK, res)
}

// republish publishes a copy of m to exchange with its first routing key
// (the others as CC) and returns once it is as safe as a confirmed
// publish, or why it is not.
func republish(v *mq.VHost, m *mq.Message, exchange string, keys []string) error {
	out := &mq.Message{Exchange: exchange, RoutingKey: m.RoutingKey, Properties: m.Properties, Body: m.Body}
	if len(keys) > 0 {
		out.RoutingKey = keys[0]
		headers := maps.Clone(m.Properties.Headers)
		delete(headers, "CC")
		if len(keys) > 1 {
			cc := make([]any, len(keys)-1)
			for i, k := range keys[1:] {
				cc[i] = k
			}
			headers["CC"] = cc
		}
		out.Properties.Headers = headers
	}
	res, err := v.Publish(out)
	if err == nil && res.Durable.Pending() {
		<-res.Durable.Done()
		err = res.Durable.Err()
	}
	var we *amqpwire.Error
	switch {
	case errors.As(err, &we):
		return errors.New(replyDetail(we))
	case err != nil:
		return err
	case res.Routed == 0:
		return fmt.Errorf("exchange '%s' routes '%s' to no queue", exchange, out.RoutingKey)
	case res.Rejected > 0:
		return fmt.Errorf("a queue exchange '%s' routes to refused it (x-overflow reject-publish)", exchange)
	}
	return nil
}
