package cluster

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestUnregisterBrokerShrinksQuorumQueues: three nodes and a fourth
// joined; a quorum queue on all four, a one-member queue on node 4, and
// Kafka's UnregisterBroker for node 4 sent straight from a client (not
// `wharf cluster remove-node`, which shrinks first). It is refused,
// INVALID_REQUEST naming the one-member queue, whose messages would go
// with the node, after shrinking node 4 off the other queue; once that
// queue is deleted, it succeeds: every node shows the other queue on the
// three left, node 4 exits, and every confirmed message is consumed.
func TestUnregisterBrokerShrinksQuorumQueues(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four broker processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 55*time.Second)
	defer cancel()
	nodes := startAPICluster(t, 3)
	nodes = joinFourth(ctx, t, nodes)
	fourth := nodes[3]

	const queue, lonely = "everywhere", "lonely"
	ch := channel(t, dialAMQP(t, nodes[0].amqp))
	if _, err := ch.QueueDeclare(queue, true, false, false, false,
		amqp.Table{"x-queue-type": "quorum", "x-quorum-initial-group-size": 4}); err != nil {
		t.Fatal(err)
	}
	awaitMembers(ctx, t, nodes, queue, 1, 2, 3, 4)
	onFourth := oneMemberQueueOn(ctx, t, ch, nodes[0], fourth.id, lonely)
	confirmed := &confirmedSet{ids: map[int]bool{}}
	if err := publishConfirmed(ctx, confirmChannel(t, nodes[1].amqp), queue, 0, 300, confirmed); err != nil {
		t.Fatal(err)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(nodes[0].kafkaAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// Sent to node 1: a client may send it to any broker, but the node
	// removed answers only until it applies its removal.
	unregister := func() (*kmsg.UnregisterBrokerResponse, error) {
		req := kmsg.NewPtrUnregisterBrokerRequest()
		req.BrokerID = 4
		return req.RequestWith(ctx, cl.SeedBrokers()[0])
	}
	resp, err := unregister()
	if err != nil {
		t.Fatal(err)
	}
	msg := ""
	if resp.ErrorMessage != nil {
		msg = *resp.ErrorMessage
	}
	if kerr.ErrorForCode(resp.ErrorCode) != kerr.InvalidRequest || !strings.Contains(msg, strconv.Quote(onFourth)) || !strings.Contains(msg, "only member") {
		t.Fatalf("UnregisterBroker of node 4, the only member of %q: %v %q; want INVALID_REQUEST naming the queue", onFourth, kerr.ErrorForCode(resp.ErrorCode), msg)
	}
	t.Logf("refused: %s", msg)
	// The refusal came after the shrinks it could make, as remove-node's.
	awaitMembers(ctx, t, nodes, queue, 1, 2, 3)

	if _, err := ch.QueueDelete(onFourth, false, false, false); err != nil {
		t.Fatal(err)
	}
	if resp, err = unregister(); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("UnregisterBroker of node 4, its one-member queue deleted: %v %+v", err, resp)
	}
	awaitMembers(ctx, t, nodes[:3], queue, 1, 2, 3)
	awaitRemovedExit(ctx, t, fourth.node)

	consumeConfirmed(ctx, t, nodes[2].amqp, queue, confirmed)
}

// oneMemberQueueOn declares one-member quorum queues named prefix-N on
// ch, a channel to node a, until one is placed on node id (each goes to a
// node leading the fewest queues, so a few do), deletes the others, and
// returns its name.
func oneMemberQueueOn(ctx context.Context, t *testing.T, ch *amqp.Channel, a apiNode, id int, prefix string) string {
	t.Helper()
	var others []string
	defer func() {
		for _, name := range others {
			if _, err := ch.QueueDelete(name, false, false, false); err != nil {
				t.Error(err)
			}
		}
	}()
	for i := range 8 {
		name := fmt.Sprintf("%s-%d", prefix, i)
		if _, err := ch.QueueDeclare(name, true, false, false, false,
			amqp.Table{"x-queue-type": "quorum", "x-quorum-initial-group-size": 1}); err != nil {
			t.Fatal(err)
		}
		v, err := a.queue(ctx, name)
		if err != nil || len(v.Members) != 1 {
			t.Fatalf("%s: %+v, %v", name, v, err)
		}
		if v.Members[0] == wharfName(id) {
			return name
		}
		others = append(others, name)
	}
	t.Fatalf("no one-member quorum queue was placed on node %d", id)
	return ""
}
