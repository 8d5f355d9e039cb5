package mq

// DeadLetterOrigin returns where a dead-lettered message was published
// before it first died: x-first-death-exchange, and the routing keys the
// x-death entry of that first death recorded (its key, then its CC keys).
// ok is false for a message that never died. It is what moving the
// messages of a dead-letter queue back to where they came from needs.
func DeadLetterOrigin(m *Message) (exchange string, routingKeys []string, ok bool) {
	h := m.Properties.Headers
	exchange, hasExchange := argString(h["x-first-death-exchange"])
	if !hasExchange {
		return "", nil, false
	}
	queue, reason := str(h["x-first-death-queue"]), str(h["x-first-death-reason"])
	deaths, _ := h["x-death"].([]any)
	for _, d := range deaths {
		t := asTable(d)
		if t == nil || str(t["queue"]) != queue || str(t["reason"]) != reason {
			continue
		}
		routingKeys = appendStrings(nil, t["routing-keys"])
		break
	}
	return exchange, routingKeys, true
}
