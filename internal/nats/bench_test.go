package nats_test

import (
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
)

// BenchmarkPubSub publishes b.N messages through one nats.go publisher to
// one subscriber on another connection, on each server in turn, and
// reports messages per second end to end. Both servers run in this
// process, beside the clients: compare the two rows of one run, not runs.
func BenchmarkPubSub(b *testing.B) {
	for _, size := range []int{16, 1024} {
		for _, s := range bothServers(b, limits{}) {
			b.Run(fmt.Sprintf("%s/%dB", s.name, size), func(b *testing.B) {
				pub, err := nats.Connect(s.url())
				if err != nil {
					b.Fatal(err)
				}
				defer pub.Close()
				subConn, err := nats.Connect(s.url())
				if err != nil {
					b.Fatal(err)
				}
				defer subConn.Close()
				done := make(chan struct{})
				count := 0
				sub, _ := subConn.Subscribe("bench", func(*nats.Msg) {
					if count++; count == b.N {
						close(done)
					}
				})
				sub.SetPendingLimits(-1, -1)
				subConn.Flush()
				body := make([]byte, size)
				b.SetBytes(int64(size))
				b.ResetTimer()
				for range b.N {
					pub.Publish("bench", body)
				}
				pub.Flush()
				<-done
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
			})
		}
	}
}
