package mq

import (
	"slices"
	"strings"
	"testing"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// TestDirectReplyToAcrossNodes: a reply consumer's name carries its node;
// replies published on another node under it (routing key or CC) reach
// it there in publish order, routed and confirmed at once; a declare of
// the name there asks its node: 1 consumer while it is there, 404 after
// its cancel, when replies to it are still routed (and dropped), as
// RabbitMQ routes them. A name of no node routes nowhere.
func TestDirectReplyToAcrossNodes(t *testing.T) {
	envs, _ := newClassicEnvs(t, 2)
	home, other := envs[0], envs[1]
	c := newConsumer(-1)
	sub := home.consume(ReplyToQueue, c, true)
	name := sub.ReplyTo()
	if !strings.HasPrefix(name, ReplyToQueue+".1.") {
		t.Fatalf("reply name %q does not name node 1", name)
	}

	if info, err := other.v.DeclareQueue(QueueDef{Name: name}, true); err != nil || info.Consumers != 1 || info.Name != name {
		t.Fatalf("declare on node 2: %+v, %v", info, err)
	}
	var want []string
	for _, body := range bodies("reply", 20) {
		m := msg("", name, body)
		if len(want)%2 == 1 {
			m = msg("", "nowhere", body)
			m.Properties.Headers = amqpwire.Table{"CC": []any{name}}
		}
		m.Properties.CorrelationID = body
		res := other.publish(m)
		if res.Routed != 1 || res.Durable.Pending() {
			t.Fatalf("reply %s: routed %d, confirm pending %v", body, res.Routed, res.Durable.Pending())
		}
		want = append(want, body)
	}
	eventually(t, "the replies on node 1", func() bool { return len(c.deliveries()) == len(want) })
	if got := c.bodies(); !slices.Equal(got, want) {
		t.Fatalf("node 1's reply consumer got %q, want %q", got, want)
	}
	if d := c.deliveries()[0]; d.Message.Properties.CorrelationID != "reply0" || d.Message.RoutingKey != name {
		t.Fatalf("first reply %+v", d.Message)
	}

	sub.Cancel()
	_, err := other.v.DeclareQueue(QueueDef{Name: name}, true)
	wantCode(t, err, amqpwire.CodeNotFound, "NOT_FOUND - no queue '"+name+"' in vhost '/'")
	if res := other.publish(msg("", name, "late")); res.Routed != 1 {
		t.Fatalf("a reply to a cancelled consumer: routed %d, want 1 as in RabbitMQ", res.Routed)
	}
	nowhere := strings.Replace(name, ReplyToQueue+".1.", ReplyToQueue+".9.", 1)
	if res := other.publish(msg("", nowhere, "lost")); res.Routed != 0 {
		t.Fatalf("a reply to node 9: routed %d", res.Routed)
	}
}
