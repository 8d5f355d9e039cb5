package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/node"
	"github.com/wharf-mq/wharf/internal/nodetest"
)

// Group benchmarks (go test -run '^$' -bench Group ./e2e/):
//
//   - BenchmarkGroupSettleAfterLeave: a group of 8 franz-go members over 16
//     partitions; one member leaves; the time until the other 7 own all 16
//     partitions again. Members heartbeat every 100 ms, which bounds how
//     fast they learn of a rebalance.
//   - BenchmarkGroupConsume: throughput of a group of 4 over 16 partitions,
//     beside a group of 1, reading 200k 100-byte records from the start.

const benchPartitions = 16

// ownership tracks which member owns each partition, from the members'
// assignment callbacks.
type ownership struct {
	mu      sync.Mutex
	owner   map[int32]string
	changed chan struct{}
}

func newOwnership() *ownership {
	return &ownership{owner: map[int32]string{}, changed: make(chan struct{}, 1)}
}

func (o *ownership) set(member string, parts []int32, own bool) {
	o.mu.Lock()
	for _, p := range parts {
		if own {
			o.owner[p] = member
		} else if o.owner[p] == member {
			delete(o.owner, p)
		}
	}
	o.mu.Unlock()
	select {
	case o.changed <- struct{}{}:
	default:
	}
}

// waitSettled waits until every partition is owned by one of members.
func (o *ownership) waitSettled(b *testing.B, members map[string]bool) {
	deadline := time.After(testTimeout)
	for {
		o.mu.Lock()
		ok := len(o.owner) == benchPartitions
		for _, m := range o.owner {
			ok = ok && members[m]
		}
		o.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-o.changed:
		case <-deadline:
			b.Fatalf("the group did not settle: owners %v", o.owner)
		}
	}
}

func benchMember(b *testing.B, n *node.Node, group, topic, name string, own *ownership, opts ...kgo.Opt) *kgo.Client {
	base := []kgo.Opt{
		kgo.SeedBrokers(n.KafkaAddr()),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.HeartbeatInterval(100 * time.Millisecond), kgo.SessionTimeout(3 * time.Second),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { own.set(name, m[topic], true) }),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { own.set(name, m[topic], false) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { own.set(name, m[topic], false) }),
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	return cl
}

func BenchmarkGroupSettleAfterLeave(b *testing.B) {
	for _, c := range []struct {
		name string
		opts []kgo.Opt
	}{
		{"range", []kgo.Opt{kgo.Balancers(kgo.RangeBalancer())}},
		{"cooperative-sticky", []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer())}},
		{"kip848", []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.ServerSideBalancer()}},
	} {
		b.Run(c.name, func(b *testing.B) {
			n := nodetest.Start(b, fastGroups)
			benchCreateTopic(b, n, "settle", nil)
			own := newOwnership()
			members := map[string]*kgo.Client{}
			live := map[string]bool{}
			next := 0
			join := func() {
				name := fmt.Sprintf("m%d", next)
				next++
				members[name] = benchMember(b, n, "settle", "settle", name, own, c.opts...)
				live[name] = true
			}
			for range 8 {
				join()
			}
			own.waitSettled(b, live)
			b.ResetTimer()
			for i := range b.N {
				leaving := fmt.Sprintf("m%d", i)
				delete(live, leaving)
				members[leaving].Close() // revokes, then LeaveGroup
				own.waitSettled(b, live)
				b.StopTimer()
				join() // back to 8 for the next round
				own.waitSettled(b, live)
				b.StartTimer()
			}
			b.StopTimer()
			for name := range live {
				members[name].Close()
			}
		})
	}
}

func BenchmarkGroupConsume(b *testing.B) {
	const records, size = 200_000, 100
	n := nodetest.Start(b, fastGroups)
	benchCreateTopic(b, n, "throughput", nil)
	producer, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.DefaultProduceTopic("throughput"), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	value := make([]byte, size)
	var wg sync.WaitGroup
	for range records {
		wg.Add(1)
		producer.Produce(context.Background(), &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				b.Error(err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	producer.Close()

	groups := 0 // each run reads from the start in a group of its own
	for _, members := range []int{1, 4} {
		b.Run(fmt.Sprintf("members=%d", members), func(b *testing.B) {
			for range b.N {
				groups++
				consumeAllInGroup(b, n, fmt.Sprintf("throughput-%d", groups), members, records)
			}
			b.ReportMetric(float64(records*b.N)/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(float64(records*size*b.N)/b.Elapsed().Seconds()/1e6, "MB/s")
		})
	}
}

// consumeAllInGroup runs a group of members that together read every record
// of "throughput" from the start.
func consumeAllInGroup(b *testing.B, n *node.Node, group string, members, records int) {
	var total sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), 2*testTimeout)
	defer cancel()
	var mu sync.Mutex
	consumed := 0
	done := make(chan struct{})
	var clients []*kgo.Client
	for range members {
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()), kgo.ConsumerGroup(group), kgo.ConsumeTopics("throughput"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.HeartbeatInterval(100*time.Millisecond),
			kgo.Balancers(kgo.CooperativeStickyBalancer()))
		if err != nil {
			b.Fatal(err)
		}
		clients = append(clients, cl)
		total.Add(1)
		go func() {
			defer total.Done()
			for {
				fetches := cl.PollFetches(ctx)
				if fetches.IsClientClosed() || ctx.Err() != nil {
					return
				}
				mu.Lock()
				consumed += fetches.NumRecords()
				if consumed >= records {
					select {
					case <-done:
					default:
						close(done)
					}
				}
				mu.Unlock()
			}
		}()
	}
	select {
	case <-done:
	case <-ctx.Done():
		b.Errorf("group %s consumed %d of %d records", group, consumed, records)
	}
	cancel()
	for _, cl := range clients {
		cl.Close()
	}
	total.Wait()
}

func benchCreateTopic(b *testing.B, n *node.Node, topic string, configs map[string]string) {
	if _, err := n.Broker().CreateTopic(broker.TopicSpec{Name: topic, Partitions: benchPartitions, Configs: configs}, false); err != nil {
		b.Fatal(err)
	}
}
