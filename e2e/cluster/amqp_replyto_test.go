package cluster

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// TestAMQPDirectReplyToAcrossNodes: an RPC client on node 1 uses direct
// reply-to (amq.rabbitmq.reply-to), its server is on node 2: the server's
// declare of the reply name (asked of node 1) says the client is there,
// and its mandatory replies, confirmed and not returned, reach the client
// in order; once the client cancels, the declare is 404, as RabbitMQ
// answers.
func TestAMQPDirectReplyToAcrossNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	_, addrs := startAMQPCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()

	client := channel(t, dialAMQP(t, addrs[0]))
	replies, err := client.Consume("amq.rabbitmq.reply-to", "replies", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	server := confirmChannel(t, addrs[1])
	serverReturns := server.NotifyReturn(make(chan amqp.Return, 1))
	if _, err := server.QueueDeclare("rpc", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	requests, err := server.Consume("rpc", "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	var replyTo string
	for i := range 20 {
		id := strconv.Itoa(i)
		err := client.PublishWithContext(ctx, "", "rpc", false, false,
			amqp.Publishing{Body: []byte(id), ReplyTo: "amq.rabbitmq.reply-to", CorrelationId: id})
		if err != nil {
			t.Fatal(err)
		}
		var req amqp.Delivery
		select {
		case req = <-requests:
		case <-ctx.Done():
			t.Fatalf("request %d not delivered to the server", i)
		}
		if !strings.HasPrefix(req.ReplyTo, "amq.rabbitmq.reply-to.") {
			t.Fatalf("request %d: reply_to %q", i, req.ReplyTo)
		}
		if replyTo = req.ReplyTo; i == 0 {
			q, err := server.QueueDeclarePassive(replyTo, false, false, false, false, nil)
			if err != nil || q.Consumers != 1 {
				t.Fatalf("declare of the reply name on node 2: %+v, %v", q, err)
			}
		}
		publishRouted(t, ctx, server, serverReturns, "", replyTo,
			amqp.Publishing{Body: []byte("re " + id), CorrelationId: req.CorrelationId})
		select {
		case d := <-replies:
			if d.CorrelationId != id || string(d.Body) != "re "+id || d.ConsumerTag != "replies" || d.RoutingKey != replyTo {
				t.Fatalf("reply %d: %q (correlation %q, tag %q, key %q)", i, d.Body, d.CorrelationId, d.ConsumerTag, d.RoutingKey)
			}
		case <-ctx.Done():
			t.Fatalf("reply %d not delivered to the client", i)
		}
	}

	if err := client.Cancel("replies", false); err != nil {
		t.Fatal(err)
	}
	_, err = channel(t, dialAMQP(t, addrs[2])).QueueDeclarePassive(replyTo, false, false, false, false, nil)
	wantAMQPError(t, "declare of the reply name on node 3 after the cancel", err, amqp.NotFound, "no queue '"+replyTo+"'")
}
