package seglog

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/wharf-mq/wharf/internal/record"
)

// BenchmarkDurableAppend measures group commit: N goroutines each appending
// batches of 1 or 16 KiB with Durable set (an fsync must cover every append
// before it returns). b.N is the total number of appends. Besides the
// throughput it reports appends per fsync and the share of the time an
// fsync was in flight (disk-busy): the commit pipeline exists to keep that
// near 100% under load. Set WHARF_BENCH_DIR to benchmark on a particular
// file system (default: the test temp dir).
func BenchmarkDurableAppend(b *testing.B) {
	for _, size := range []int{1 << 10, 16 << 10} {
		for _, appenders := range []int{1, 8, 32} {
			b.Run(fmt.Sprintf("batch=%dKiB/appenders=%d", size>>10, appenders), func(b *testing.B) {
				benchDurableAppend(b, size, appenders)
			})
		}
	}
}

func benchDurableAppend(b *testing.B, size, appenders int) {
	dir := b.TempDir()
	if base := os.Getenv("WHARF_BENCH_DIR"); base != "" {
		var err error
		if dir, err = os.MkdirTemp(base, "seglog-bench-"); err != nil {
			b.Fatal(err)
		}
		defer os.RemoveAll(dir)
	}
	l := mustOpen(b, dir, DefaultConfig())
	defer l.Close()
	payload := record.NewBatch(0, []record.Record{{Value: make([]byte, size-record.HeaderSize-10)}})
	b.SetBytes(int64(len(payload)))
	b.ResetTimer()

	var remaining atomic.Int64
	remaining.Store(int64(b.N))
	var wg sync.WaitGroup
	for range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			batch := append([]byte(nil), payload...) // Append rewrites it in place
			for remaining.Add(-1) >= 0 {
				if _, err := l.Append(batch, AppendOptions{Durable: true}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
	l.mu.Lock()
	rounds, busy := l.syncRounds, l.syncBusy
	l.mu.Unlock()
	b.ReportMetric(float64(b.N)/float64(max(rounds, 1)), "appends/fsync")
	b.ReportMetric(100*busy.Seconds()/b.Elapsed().Seconds(), "%disk-busy")
}
