package kafka

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/broker"
)

// TestMinInsyncReplicasConfig: min.insync.replicas is a topic config as in
// Kafka. On one node a partition has one in-sync replica, so a topic
// created with min.insync.replicas=2 refuses acks=all with
// NOT_ENOUGH_REPLICAS while acks=1 still writes; lowering it with
// IncrementalAlterConfigs lets acks=all through. DescribeConfigs reports
// the override as DYNAMIC_TOPIC_CONFIG and, without one, min(2, RF) = 1
// as DEFAULT_CONFIG.
func TestMinInsyncReplicasConfig(t *testing.T) {
	ts := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := ts.admin(t)
	two := "2"
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"min.insync.replicas": &two}, "strict"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "plain"); err != nil {
		t.Fatal(err)
	}
	checkMinISR(ctx, t, adm, "strict", "2", kmsg.ConfigSourceDynamicTopicConfig)
	checkMinISR(ctx, t, adm, "plain", "1", kmsg.ConfigSourceDefaultConfig)

	produce := func(extra ...kgo.Opt) error {
		opts := append([]kgo.Opt{kgo.DefaultProduceTopic("strict"), kgo.RecordRetries(0)}, extra...)
		return ts.client(t, opts...).ProduceSync(ctx, kgo.StringRecord("v")).FirstErr()
	}
	if err := produce(); !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("acks=all with min.insync.replicas=2 on one replica: %v, want NOT_ENOUGH_REPLICAS", err)
	}
	if err := produce(kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()); err != nil {
		t.Fatalf("acks=1 with min.insync.replicas=2: %v", err)
	}

	one := "1"
	resps, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "min.insync.replicas", Value: &one}}, "strict")
	if err == nil {
		var r kadm.AlterConfigsResponse
		if r, err = resps.On("strict", nil); err == nil {
			err = r.Err
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := produce(); err != nil {
		t.Fatalf("acks=all once min.insync.replicas=1: %v", err)
	}
	zero := "0"
	resps, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "min.insync.replicas", Value: &zero}}, "strict")
	if err == nil {
		var r kadm.AlterConfigsResponse
		if r, err = resps.On("strict", nil); err == nil {
			err = r.Err
		}
	}
	if !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("min.insync.replicas=0: %v, want INVALID_CONFIG", err)
	}
}

// TestMinInsyncReplicasBrokerDefault: the broker's min.insync.replicas
// (wharf serve --min-insync-replicas) is every topic's default, reported
// as STATIC_BROKER_CONFIG, and listed with the broker's configs.
func TestMinInsyncReplicasBrokerDefault(t *testing.T) {
	ts := startServer(t, withBrokerConfig(func(c *broker.Config) { c.MinInsyncReplicas = 2 }))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := ts.admin(t)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	checkMinISR(ctx, t, adm, "t", "2", kmsg.ConfigSourceStaticBrokerConfig)
	err := ts.client(t, kgo.DefaultProduceTopic("t"), kgo.RecordRetries(0)).ProduceSync(ctx, kgo.StringRecord("v")).FirstErr()
	if !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("acks=all under the broker's min.insync.replicas=2: %v, want NOT_ENOUGH_REPLICAS", err)
	}
	id := ts.b.NodeID()
	rcs, err := adm.DescribeBrokerConfigs(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	c, err := rcs.On(strconv.Itoa(int(id)), nil)
	if err == nil {
		var found bool
		for _, e := range c.Configs {
			found = found || e.Key == "min.insync.replicas" && e.MaybeValue() == "2" && e.Source == kmsg.ConfigSourceStaticBrokerConfig
		}
		if !found {
			err = errors.New("no min.insync.replicas=2 (STATIC_BROKER_CONFIG) among them")
		}
	}
	if err != nil {
		t.Fatalf("broker configs: %v", err)
	}
}

// checkMinISR checks topic's min.insync.replicas as DescribeConfigs
// reports it.
func checkMinISR(ctx context.Context, t *testing.T, adm *kadm.Client, topic, value string, source kmsg.ConfigSource) {
	t.Helper()
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rc.Configs {
		if c.Key != "min.insync.replicas" {
			continue
		}
		if c.MaybeValue() != value || c.Source != source {
			t.Fatalf("%s: min.insync.replicas = %q from %v, want %q from %v", topic, c.MaybeValue(), c.Source, value, source)
		}
		return
	}
	t.Fatalf("%s: no min.insync.replicas among its configs", topic)
}

// TestOffsetForLeaderEpochSingleNode: a single node leads every partition
// at epoch 0, so epoch 0 ends at the log end offset, a later epoch is
// UNDEFINED_EPOCH_OFFSET, and a CurrentLeaderEpoch from the future is
// UNKNOWN_LEADER_EPOCH.
func TestOffsetForLeaderEpochSingleNode(t *testing.T) {
	ts := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ts.createTopic(t, "e", 1, nil)
	cl := ts.client(t, kgo.DefaultProduceTopic("e"))
	for range 3 {
		if err := cl.ProduceSync(ctx, kgo.StringRecord("v")).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	ask := func(topic string, current, epoch int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.ReplicaID = -1
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.CurrentLeaderEpoch, rp.LeaderEpoch = current, epoch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := cl.SeedBrokers()[0].Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
	}
	cases := []struct {
		topic          string
		current, epoch int32
		code           int16
		leaderEpoch    int32
		end            int64
	}{
		{"e", 0, 0, 0, 0, 3},
		{"e", -1, 0, 0, 0, 3},
		{"e", 0, 1, 0, -1, -1},
		{"e", 1, 0, kerr.UnknownLeaderEpoch.Code, -1, -1},
		{"missing", -1, 0, kerr.UnknownTopicOrPartition.Code, -1, -1},
	}
	for _, c := range cases {
		got := ask(c.topic, c.current, c.epoch)
		if got.ErrorCode != c.code || got.LeaderEpoch != c.leaderEpoch || got.EndOffset != c.end {
			t.Errorf("%s current %d epoch %d: error %d, epoch %d, end %d; want %d, %d, %d",
				c.topic, c.current, c.epoch, got.ErrorCode, got.LeaderEpoch, got.EndOffset, c.code, c.leaderEpoch, c.end)
		}
	}
}
