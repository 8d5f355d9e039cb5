package broker

import (
	"testing"

	"github.com/wharf-mq/wharf/internal/replica"
)

// TestEpochEnd: where an epoch ends, as Kafka's LeaderEpochFileCache
// answers, over a log of epochs 2 (from 10), 5 (from 40) and the current
// 7 (from 60, nothing written in it yet), ending at 60.
func TestEpochEnd(t *testing.T) {
	starts := []replica.EpochStart{{Epoch: 2, StartOffset: 10}, {Epoch: 5, StartOffset: 40}, {Epoch: 7, StartOffset: 60}}
	cases := []struct {
		epoch, wantEpoch int32
		wantEnd          int64
	}{
		{-1, -1, -1}, // UNDEFINED_EPOCH
		{1, 1, 10},   // before every epoch: where the first begins
		{2, 2, 40},
		{3, 2, 40}, // an epoch that wrote nothing ends where the one before it does
		{5, 5, 60},
		{6, 5, 60},
		{7, 7, 60}, // the current epoch: the log end
		{8, -1, -1},
	}
	for _, c := range cases {
		if e, end := epochEnd(starts, c.epoch, 60); e != c.wantEpoch || end != c.wantEnd {
			t.Errorf("epoch %d: (%d, %d), want (%d, %d)", c.epoch, e, end, c.wantEpoch, c.wantEnd)
		}
	}
}
