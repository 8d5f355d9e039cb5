package replica_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/raft"
	"github.com/wharf-mq/wharf/internal/record"
	"github.com/wharf-mq/wharf/internal/replica"
)

// compactedConfig is a compacted topic's config with small segments, so
// that a few hundred records fill many, and no threshold holding a pass
// back.
func compactedConfig() replica.Config {
	cfg := replica.DefaultConfig()
	cfg.Compact, cfg.Delete = true, false
	cfg.SegmentBytes = 1024
	cfg.MinCleanableDirtyRatio = 0
	return cfg
}

// TestRaftLogCompaction: every replica compacts its own log, below its
// anchor; a follower that was away while the others compacted catches up
// from a snapshot that ships their compacted log, gaps and all (whole
// segments of superseded records gone, or gaps between the batches
// kept); every replica then holds the latest value of every key, after a
// restart of all of them too, and a further pass on the caught-up
// follower keeps it so.
func TestRaftLogCompaction(t *testing.T) {
	for _, tc := range []struct {
		name string
		// batch returns round i's batch: keyed records.
		batch func(rng *rand.Rand, i int) []record.Record
	}{
		{"EveryKeyEachRound", func(_ *rand.Rand, i int) []record.Record {
			recs := make([]record.Record, 8)
			for k := range recs {
				recs[k] = record.Record{Key: fmt.Appendf(nil, "k%d", k), Value: fmt.Appendf(nil, "v%d-%d", i, k)}
			}
			return recs
		}},
		{"RandomKeys", func(rng *rand.Rand, i int) []record.Record {
			recs := make([]record.Record, 1+rng.IntN(3))
			for k := range recs {
				recs[k] = record.Record{Key: fmt.Appendf(nil, "k%d", rng.IntN(12)), Value: fmt.Appendf(nil, "v%d-%d", i, k)}
			}
			return recs
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			net := raft.NewMemNetwork()
			dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
			hosts := make([]*raft.Host, 3)
			logs := make([]*replica.RaftLog, 3)
			open := func(i int) {
				hosts[i] = startHost(t, uint64(i+1), net)
				l, err := replica.OpenRaft(dirs[i], compactedConfig(), replica.RaftOptions{
					Host: hosts[i], Group: 7, Members: []uint64{1, 2, 3}, Window: 4, Logger: quiet})
				if err != nil {
					t.Fatalf("node %d does not open: %v", i+1, err)
				}
				logs[i] = l
				t.Cleanup(func() { l.Close() })
			}
			stop := func(i int) {
				logs[i].Close()
				hosts[i].Close()
				net.Unregister(uint64(i + 1))
			}
			for i := range 3 {
				open(i)
			}
			want := map[string]string{} // every key's latest value
			write := func(live []*replica.RaftLog, rounds int) int64 {
				var end int64
				for range rounds {
					recs := tc.batch(rng, len(want)+rng.IntN(1<<20))
					for _, r := range recs {
						want[string(r.Key)] = string(r.Value)
					}
					end = appendAcked(t, live, recs)
				}
				return end
			}

			end := write(logs, 40)
			waitHW(t, logs[2], end)
			stop(2)
			end = write(logs[:2], 80)
			for _, l := range logs[:2] {
				waitHW(t, l, end)
				before := l.Size()
				compactUntilCleaned(t, l)
				if l.Size() >= before {
					t.Fatalf("compaction left %d bytes of %d", l.Size(), before)
				}
				checkLatest(t, l, want)
			}

			open(2)
			waitHW(t, logs[2], end)
			checkLatest(t, logs[2], want)
			if logs[2].StartOffset() != 0 {
				t.Fatalf("the caught-up follower starts at %d, want 0", logs[2].StartOffset())
			}

			// Every replica recovers its compacted log; the follower
			// compacts what it was shipped.
			for i := range 3 {
				stop(i)
			}
			for i := range 3 {
				open(i)
			}
			end = write(logs, 20)
			for _, l := range logs {
				waitHW(t, l, end)
				if _, err := l.Compact(context.Background(), time.Now()); err != nil {
					t.Fatal(err)
				}
				checkLatest(t, l, want)
			}
		})
	}
}

// appendAcked appends a batch of recs through whichever of logs leads
// until it is acknowledged, and returns the offset after it. With ticks of
// 10 ms an election may come between finding the leader and the ack (under
// -race on a busy machine): the batch is appended again through the next
// leader, and may then be in the log twice, which changes no key's latest
// value.
func appendAcked(t *testing.T, logs []*replica.RaftLog, recs []record.Record) int64 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		a, err := leaderOf(t, logs).Append(record.NewBatch(time.Now().UnixMilli(), recs), replica.AppendOptions{AckCommitted: true})
		if err == nil {
			err = a.Ack.Wait(context.Background())
		}
		switch {
		case err == nil:
			return a.LastOffset + 1
		case !errors.Is(err, replica.ErrNotLeader) && !errors.Is(err, replica.ErrAppendRefused) && !errors.Is(err, replica.ErrTruncated):
			t.Fatal(err)
		case time.Now().After(deadline):
			t.Fatalf("no append of the batch acknowledged in 30s: %v", err)
		}
	}
}

// compactUntilCleaned runs passes until one cleans: a leader may not have
// applied (and so released from its index) what it knows committed yet.
func compactUntilCleaned(t *testing.T, l *replica.RaftLog) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := l.Compact(context.Background(), time.Now())
		switch {
		case err != nil:
			t.Fatal(err)
		case st.Cleaned && st.RecordsRemoved > 0:
			return
		case time.Now().After(deadline):
			t.Fatalf("no pass cleaned anything in 10s: %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// checkLatest fails the test unless l's committed records give every key
// of want its value there, and no other key.
func checkLatest(t *testing.T, l *replica.RaftLog, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	forEachRecord(t, l, l.HighWatermark(), func(_ int64, r record.Record) {
		got[string(r.Key)] = string(r.Value)
	})
	if !maps.Equal(got, want) {
		t.Fatalf("%s holds\n%v\nwant\n%v", l.Dir(), got, want)
	}
}

// readableLog is what forEachRecord reads: a replica's log, or a log it
// staged.
type readableLog interface {
	StartOffset() int64
	Read(offset, maxBytes int64) (*replica.Slice, error)
}

// forEachRecord calls fn with each record of l below end, and its offset.
func forEachRecord(t *testing.T, l readableLog, end int64, fn func(off int64, r record.Record)) {
	t.Helper()
	for next := l.StartOffset(); next < end; {
		s, err := l.Read(next, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.Bytes()
		s.Release()
		if err != nil || len(b) == 0 {
			t.Fatalf("read at %d below %d: %d bytes, %v", next, end, len(b), err)
		}
		for len(b) > 0 {
			h, err := record.Verify(b)
			if err != nil {
				t.Fatal(err)
			}
			recs, err := record.Records(b[:h.Size()])
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				if off := h.BaseOffset + int64(r.OffsetDelta); off >= next && off < end {
					fn(off, r)
				}
			}
			next = max(next, h.LastOffset()+1)
			b = b[h.Size():]
		}
	}
}
