package mq

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// BenchmarkPublishPersistentConfirms publishes 1 KiB persistent messages to
// one durable queue from 1 and 4 goroutines, each keeping up to 256
// confirms outstanding (a confirm-mode AMQP publisher's pipeline). Every
// confirm waits for an fsync covering its message.
func BenchmarkPublishPersistentConfirms(b *testing.B) {
	for _, publishers := range []int{1, 4} {
		b.Run(fmt.Sprintf("publishers=%d", publishers), func(b *testing.B) {
			benchmarkConfirms(b, publishers, 256, 1024)
		})
	}
}

func benchmarkConfirms(b *testing.B, publishers, window, size int) {
	defs := newMemDefs()
	r, err := Open(Config{DataDir: b.TempDir(), Definitions: defs})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	v, _ := r.VHost("/")
	if _, err := v.DeclareQueue(QueueDef{Name: "bench", Durable: true}, false); err != nil {
		b.Fatal(err)
	}
	body := make([]byte, size)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, publishers)
	for p := range publishers {
		n := b.N / publishers
		if p < b.N%publishers {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			pending := make(chan Durability, window)
			for range n {
				if len(pending) == window {
					if err := (<-pending).wait(); err != nil {
						errs <- err
						return
					}
				}
				m := &Message{RoutingKey: "bench", Body: body}
				m.Properties.DeliveryMode = 2
				res, err := v.Publish(m)
				if err != nil {
					errs <- err
					return
				}
				pending <- res.Durable
			}
			for len(pending) > 0 {
				if err := (<-pending).wait(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(b.N)/float64(max(r.syncer.Rounds(), 1)), "msgs/fsync")
}

// BenchmarkPublishUnroutable publishes small transient messages through a
// fanout exchange nobody is bound to, on a single node and on a node of a
// cluster (whose definitions are in memory here, a barrier free), where
// such a publish may catch up with the cluster first (routeCaughtUp): its
// cost on the publish path, a barrier's aside.
func BenchmarkPublishUnroutable(b *testing.B) {
	for _, cluster := range []bool{false, true} {
		b.Run(fmt.Sprintf("cluster=%v", cluster), func(b *testing.B) {
			cfg := Config{DataDir: b.TempDir(), Definitions: newMemDefs()}
			if cluster {
				d := nodeDefs{c: newClusterDefs(), node: 1}
				cfg.Definitions, cfg.Cluster = d, d.cluster()
			}
			r, err := Open(cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			v, _ := r.VHost("/")
			if err := v.DeclareExchange(ExchangeDef{Name: "nobody", Type: "fanout"}, false); err != nil {
				b.Fatal(err)
			}
			m := &Message{Exchange: "nobody", Body: make([]byte, 64)}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if res, err := v.Publish(m); err != nil || res.Routed != 0 {
					b.Fatalf("routed %d, %v", res.Routed, err)
				}
			}
		})
	}
}
