package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wharf-mq/wharf/internal/node"
	"github.com/wharf-mq/wharf/internal/nodetest"
)

// The topics a Kafka client may not create, delete or reshape, and the
// answers it gets, as Kafka (or, where Kafka's broker has no rule, Redpanda)
// gives them.

// restartNode closes n and starts a node on its data directory.
func restartNode(t *testing.T, n *node.Node, dir string) *node.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := n.Close(ctx); err != nil {
		t.Fatalf("close node: %v", err)
	}
	return nodetest.Start(t, nodetest.WithDataDir(dir))
}

// wantKafkaError fails the test unless err is k and message holds text.
func wantKafkaError(t *testing.T, what string, err error, message string, k *kerr.Error, text string) {
	t.Helper()
	if !errors.Is(err, k) || !strings.Contains(message, text) {
		t.Errorf("%s: %v %q, want %s with %q", what, err, message, k.Message, text)
	}
}

// TestReservedTopicNamesCannotBeCreated: __cluster_metadata is the name of
// the metadata log's directory (partition 0), and the two internal topics
// belong to the group and transaction coordinators, which create them. A
// client's CreateTopics, or a produce with auto-creation on, is refused as
// Kafka refuses __cluster_metadata, and the node still starts afterwards.
func TestReservedTopicNamesCannotBeCreated(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	n := nodetest.Start(t, nodetest.WithDataDir(dir))
	for _, name := range []string{"__cluster_metadata", "__consumer_offsets", "__transaction_state"} {
		resp, err := newAdmin(t, n).CreateTopic(testContext(t), 1, 1, nil, name)
		wantKafkaError(t, "CreateTopics "+name, err, resp.ErrMessage,
			kerr.InvalidRequest, "Creation of internal topic "+name+" is prohibited.")
	}
	cl := newFranz(t, n, kgo.AllowAutoTopicCreation(), kgo.RecordRetries(1))
	ctx, cancel := context.WithTimeout(testContext(t), 5*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "__cluster_metadata", Value: []byte("x")}).FirstErr(); err == nil {
		t.Error("a produce to __cluster_metadata was acknowledged")
	}
	n = restartNode(t, n, dir)
	createTopic(t, newAdmin(t, n), "after-restart", 1, nil)
}

// TestCollidingTopicNamesAreRefused: Kafka refuses a topic whose name
// differs from an existing one only by '.' against '_'.
func TestCollidingTopicNamesAreRefused(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	adm := newAdmin(t, n)
	createTopic(t, adm, "a_b", 1, nil)
	resp, err := adm.CreateTopic(testContext(t), 1, 1, nil, "a.b")
	wantKafkaError(t, "CreateTopics a.b", err, resp.ErrMessage,
		kerr.InvalidTopicException, "Topic 'a.b' collides with existing topic: a_b")
	resp, err = adm.CreateTopic(testContext(t), 1, 1, nil, "a_b")
	wantKafkaError(t, "CreateTopics a_b again", err, resp.ErrMessage, kerr.TopicAlreadyExists, "")
	createTopic(t, adm, "a-b", 1, nil) // '-' is not folded
}

// TestInternalTopicsAreProtected: __consumer_offsets and
// __transaction_state cannot be deleted, grown or reconfigured, nor their
// records deleted; a group's committed offsets survive the attempts and a
// restart.
func TestInternalTopicsAreProtected(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	n := nodetest.Start(t, nodetest.WithDataDir(dir))
	adm := newAdmin(t, n)
	createTopic(t, adm, "orders", 1, nil)
	commitOneTransaction(t, n, "orders") // creates __transaction_state
	var committed kadm.Offsets
	committed.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 5, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(testContext(t), "billing", committed); err != nil {
		t.Fatalf("commit offsets: %v", err)
	}

	internal := []string{"__consumer_offsets", "__transaction_state"}
	deleted, err := adm.DeleteTopics(testContext(t), internal...)
	if err != nil {
		t.Fatalf("DeleteTopics: %v", err)
	}
	grown, err := adm.CreatePartitions(testContext(t), 1, internal...)
	if err != nil {
		t.Fatalf("CreatePartitions: %v", err)
	}
	policy := "delete"
	set := []kadm.AlterConfig{{Name: "cleanup.policy", Value: &policy}}
	altered, err := adm.AlterTopicConfigs(testContext(t), set, internal...)
	if err != nil {
		t.Fatalf("IncrementalAlterConfigs: %v", err)
	}
	replaced, err := adm.AlterTopicConfigsState(testContext(t), set, internal...)
	if err != nil {
		t.Fatalf("AlterConfigs: %v", err)
	}
	for _, topic := range internal {
		d := deleted[topic]
		wantKafkaError(t, "DeleteTopics "+topic, d.Err, d.ErrMessage, kerr.TopicAuthorizationFailed, "internal")
		g := grown[topic]
		wantKafkaError(t, "CreatePartitions "+topic, g.Err, g.ErrMessage, kerr.TopicAuthorizationFailed, "internal")
		for what, rs := range map[string]kadm.AlterConfigsResponses{"IncrementalAlterConfigs": altered, "AlterConfigs": replaced} {
			a, _ := rs.On(topic, nil)
			wantKafkaError(t, what+" "+topic, a.Err, a.ErrMessage, kerr.TopicAuthorizationFailed, "internal")
		}
	}
	var head kadm.Offsets
	head.Add(kadm.Offset{Topic: "__consumer_offsets", Partition: 0, At: -1})
	dr, err := adm.DeleteRecords(testContext(t), head)
	if err != nil {
		t.Fatalf("DeleteRecords: %v", err)
	}
	if r, _ := dr.Lookup("__consumer_offsets", 0); !errors.Is(r.Err, kerr.InvalidTopicException) {
		t.Errorf("DeleteRecords __consumer_offsets: %v, want %s", r.Err, kerr.InvalidTopicException.Message)
	}

	n = restartNode(t, n, dir)
	fetched, err := newAdmin(t, n).FetchOffsets(testContext(t), "billing")
	if err != nil {
		t.Fatalf("fetch offsets after restart: %v", err)
	}
	if o, ok := fetched.Lookup("orders", 0); !ok || o.At != 5 {
		t.Errorf("billing's offset for orders-0 after a restart: %+v (found %v), want 5", o.Offset, ok)
	}
}

// TestStreamQueueTopicIsProtected: the topic of an AMQP stream queue
// cannot be deleted or grown through Kafka while the queue exists (the
// queue would be left publishing into nothing, or fail to load); it goes
// with the queue.
func TestStreamQueueTopicIsProtected(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	n := nodetest.Start(t, nodetest.WithDataDir(dir))
	ch := streamChannel(t, n)
	if _, err := ch.QueueDeclare("events", true, false, false, false, amqp091.Table{"x-queue-type": "stream"}); err != nil {
		t.Fatal(err)
	}
	publishConfirmed(t, ch, "events", "before")

	adm := newAdmin(t, n)
	deleted, err := adm.DeleteTopics(testContext(t), "events")
	if err != nil {
		t.Fatalf("DeleteTopics: %v", err)
	}
	d := deleted["events"]
	wantKafkaError(t, "DeleteTopics events", d.Err, d.ErrMessage, kerr.TopicAuthorizationFailed, "stream queue 'events' in vhost '/'")
	grown, err := adm.CreatePartitions(testContext(t), 1, "events")
	if err != nil {
		t.Fatalf("CreatePartitions: %v", err)
	}
	g := grown["events"]
	wantKafkaError(t, "CreatePartitions events", g.Err, g.ErrMessage, kerr.InvalidPartitions, "stream queue 'events' in vhost '/'")
	publishConfirmed(t, ch, "events", "after")

	n = restartNode(t, n, dir)
	ch = streamChannel(t, n)
	if q, err := ch.QueueDeclarePassive("events", true, false, false, false, amqp091.Table{"x-queue-type": "stream"}); err != nil || q.Messages != 2 {
		t.Fatalf("stream queue after a restart: %+v, %v; want 2 messages", q, err)
	}
	if _, err := ch.QueueDelete("events", false, false, false); err != nil {
		t.Fatalf("queue.delete: %v", err)
	}
	topics, err := newAdmin(t, n).ListTopics(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if topics.Has("events") {
		t.Error("the topic of a deleted stream queue is still there")
	}
}

// publishConfirmed publishes body to queue and waits for its confirm.
func publishConfirmed(t *testing.T, ch *amqp091.Channel, queue, body string) {
	t.Helper()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	dc, err := ch.PublishWithDeferredConfirmWithContext(testContext(t), "", queue, false, false, amqp091.Publishing{Body: []byte(body)})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := dc.WaitContext(testContext(t)); !ok || err != nil {
		t.Fatalf("confirm of %q: %v %v", body, ok, err)
	}
}

// commitOneTransaction produces one record to topic in a committed
// transaction.
func commitOneTransaction(t *testing.T, n *node.Node, topic string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.TransactionalID("protect-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(testContext(t), &kgo.Record{Topic: topic, Value: []byte("txn")}).FirstErr(); err != nil {
		t.Fatalf("transactional produce: %v", err)
	}
	if err := cl.EndTransaction(testContext(t), kgo.TryCommit); err != nil {
		t.Fatalf("commit: %v", err)
	}
}
