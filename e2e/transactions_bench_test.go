package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wharf-mq/wharf/internal/node"
	"github.com/wharf-mq/wharf/internal/nodetest"
)

// BenchmarkTxnProduce (go test -run '^$' -bench TxnProduce ./e2e/) is the
// produce throughput of 1 KiB records (acks=all, 4 partitions, one
// franz-go client) three ways on the same node:
//
//   - idempotent: the non-transactional idempotent producer, the baseline;
//   - txn-100 and txn-1000: a transactional producer committing every 100
//     or 1000 records. Each transaction costs AddPartitionsToTxn, EndTxn and
//     a durable marker per partition, plus the coordinator's durable writes
//     to __transaction_state (Ongoing, PrepareCommit, CompleteCommit).
//
// MB/s counts record values; records/s is reported beside it.
func BenchmarkTxnProduce(b *testing.B) {
	n := nodetest.Start(b, nodetest.WithConfig(func(c *node.Config) { c.Logger = slog.New(slog.DiscardHandler) }))
	value := make([]byte, 1024)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	for _, size := range []int{0, 100, 1000} {
		name := "idempotent"
		if size > 0 {
			name = fmt.Sprintf("txn-%d", size)
		}
		topic := "bench-" + name
		benchTopic(b, n, topic)
		b.Run(name, func(b *testing.B) {
			opts := []kgo.Opt{kgo.SeedBrokers(n.KafkaAddr()), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks())}
			if size > 0 {
				opts = append(opts, kgo.TransactionalID("bench-"+name))
			}
			cl, err := kgo.NewClient(opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			ctx := context.Background()
			// Warm up: metadata, producer id, coordinator lookup.
			produceBatch(b, ctx, cl, value, 1, size > 0)

			b.SetBytes(int64(len(value)))
			b.ResetTimer()
			if size == 0 {
				produceBatch(b, ctx, cl, value, b.N, false)
			} else {
				for left := b.N; left > 0; left -= size {
					produceBatch(b, ctx, cl, value, min(left, size), true)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

func benchTopic(b *testing.B, n *node.Node, topic string) {
	b.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(context.Background(), 4, 1, nil, topic); err != nil {
		b.Fatalf("create %s: %v", topic, err)
	}
}

// produceBatch produces count records and waits for all of them, inside
// one committed transaction when inTxn.
func produceBatch(b *testing.B, ctx context.Context, cl *kgo.Client, value []byte, count int, inTxn bool) {
	if inTxn {
		if err := cl.BeginTransaction(); err != nil {
			b.Fatal(err)
		}
	}
	failed := make(chan error, 1)
	for range count {
		cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case failed <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	if inTxn {
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case err := <-failed:
		b.Fatalf("produce: %v", err)
	default:
	}
}
