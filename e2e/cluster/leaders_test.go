package cluster

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestEveryNodeKnowsEveryLeader: three processes and a topic of three
// partitions with one replica each, so that each node holds a replica of
// only one of them. Asked directly, every node must answer Metadata with
// every partition's leader (its one replica), as every Kafka broker has
// the full metadata; and after the node holding a partition is killed,
// the others must stop naming it (LEADER_NOT_AVAILABLE) and leave it out
// of the brokers.
func TestEveryNodeKnowsEveryLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	nodes := startCluster(t, 3)
	logsOnFailure(t, nodes)
	seeds := seedsOf(nodes)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	const topic = "sparse"
	admin := newAdmin(t, seeds)
	for {
		resp, err := admin.CreateTopic(ctx, 3, 1, nil, topic)
		if err == nil && (resp.Err == nil || errors.Is(resp.Err, kerr.TopicAlreadyExists)) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("create %s: %v %v", topic, err, resp.Err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	holder := map[int32]int32{} // partition → its one replica
	for _, nd := range nodes {
		awaitMetadata(ctx, t, cl, int32(nd.id), topic, func(resp *kmsg.MetadataResponse) error {
			for _, p := range resp.Topics[0].Partitions {
				if len(p.Replicas) != 1 || p.Leader != p.Replicas[0] {
					return fmt.Errorf("partition %d: leader %d, replicas %v", p.Partition, p.Leader, p.Replicas)
				}
				holder[p.Partition] = p.Leader
			}
			return nil
		})
	}
	t.Logf("every node names every leader: %v", holder)

	victim := holder[0]
	nodes[victim-1].kill()
	for _, nd := range nodes {
		if int32(nd.id) == victim {
			continue
		}
		awaitMetadata(ctx, t, cl, int32(nd.id), topic, func(resp *kmsg.MetadataResponse) error {
			for _, b := range resp.Brokers {
				if b.NodeID == victim {
					return fmt.Errorf("node %d, killed, still listed", victim)
				}
			}
			for _, p := range resp.Topics[0].Partitions {
				if p.Partition == 0 && (p.Leader != -1 || p.ErrorCode != kerr.LeaderNotAvailable.Code) {
					return fmt.Errorf("partition 0 of killed node %d: leader %d, error %d", victim, p.Leader, p.ErrorCode)
				}
			}
			return nil
		})
	}
}

// awaitMetadata asks node for topic's metadata until check accepts it.
func awaitMetadata(ctx context.Context, t *testing.T, cl *kgo.Client, node int32, topic string, check func(*kmsg.MetadataResponse) error) {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	for {
		resp, err := req.RequestWith(ctx, cl.Broker(int(node)))
		if err == nil && len(resp.Topics) == 1 {
			if err = check(resp); err == nil {
				return
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("node %d: %v", node, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
