package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wharf-mq/wharf/internal/replica"
)

// storage is the fsync latency and group-commit batch size of every log
// in the process. The log seam reports commit rounds process-wide, so there is
// one set of histograms, fed from the first New on and shared by every
// node's registries.
type storage struct {
	fsync, batch prometheus.Histogram
}

var (
	storageOnce sync.Once
	processWide *storage
)

// storageMetrics returns the process's storage histograms, installing
// the commit observer that feeds them on first use.
func storageMetrics() prometheus.Collector {
	storageOnce.Do(func() {
		processWide = &storage{
			fsync: prometheus.NewHistogram(prometheus.HistogramOpts{
				Name:    "wharf_fsync_duration_seconds",
				Help:    "Time one group-commit round spent in fdatasync (segment data and new directories), over every log.",
				Buckets: latencyBuckets,
			}),
			batch: prometheus.NewHistogram(prometheus.HistogramOpts{
				Name:    "wharf_group_commit_offsets",
				Help:    "Offsets (records or queue messages) one group-commit fsync made durable.",
				Buckets: prometheus.ExponentialBuckets(1, 4, 10),
			}),
		}
		replica.SetCommitObserver(func(fsync time.Duration, offsets int64) {
			processWide.fsync.Observe(fsync.Seconds())
			processWide.batch.Observe(float64(offsets))
		})
	})
	return processWide
}

func (s *storage) Describe(ch chan<- *prometheus.Desc) {
	s.fsync.Describe(ch)
	s.batch.Describe(ch)
}

func (s *storage) Collect(ch chan<- prometheus.Metric) {
	s.fsync.Collect(ch)
	s.batch.Collect(ch)
}
