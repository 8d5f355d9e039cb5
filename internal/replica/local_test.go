package replica_test

import (
	"log/slog"
	"testing"

	"github.com/wharf-mq/wharf/internal/replica"
	"github.com/wharf-mq/wharf/internal/replica/replicatest"
)

func TestLocalConformance(t *testing.T) {
	replicatest.Run(t, func(t *testing.T, dir string) replica.Log {
		cfg := replica.DefaultConfig()
		cfg.SegmentBytes = 1024 // several segments from little data
		l, err := replica.Open(dir, cfg, replica.Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return l
	})
}
