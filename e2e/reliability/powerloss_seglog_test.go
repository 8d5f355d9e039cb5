package reliability

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/record"
	"github.com/wharf-mq/wharf/internal/seglog"
)

// Shape of the seglog-level load: writers append batches of 1..maxBatch
// records, each batch durable (acks=all) or not at random, while a flusher
// calls Sync as the broker's background flusher does. Each cut draws its
// share of durable appends and its flush period, so some cuts find long
// unsynced tails and others almost none.
const (
	seglogWriters  = 4
	seglogMaxBatch = 4
	maxFlushPeriod = 50 * time.Millisecond
)

var durableShares = []float64{0.05, 0.5, 0.95}

// variants are the two ways a cut copy loses its unsynced bytes.
var variants = []string{"truncated", "zeroed"}

// TestPowerLossSeglog cuts the power under a live seglog.Log again and
// again: every batch whose durable Append returned before the cut must be
// in the reopened copy, at the offset Append gave it, and the copy holds
// nothing that was not appended there.
func TestPowerLossSeglog(t *testing.T) {
	rng := newRand(t)
	work := workDir(t)
	totals := map[string]tally{}
	var dropped int64
	var writes, durableAcks int
	for cut := 1; cut <= *cutsFlag; cut++ {
		dir := filepath.Join(work, fmt.Sprintf("cut-%03d", cut))
		run := runSeglogLoad(t, rng, dir, seglogLoad{})
		dropped += run.stats.droppedBytes
		writes += len(run.byOffset)
		durableAcks += len(run.acked)
		for _, v := range variants {
			c := checkSeglogCopy(t, newReporter(t, fmt.Sprintf("cut %d %s", cut, v)), run, filepath.Join(dir, v))
			totals[v] = totals[v].add(c)
			t.Logf("cut %d after %v, %s: %s", cut, run.loadFor.Round(time.Millisecond), v, c)
		}
		if t.Failed() {
			t.Fatalf("cut %d: acknowledged data damaged; the copies are in %s", cut, dir)
		}
		t.Logf("cut %d (%s): %s", cut, run.shape, run.stats)
	}
	for _, v := range variants {
		t.Logf("total over %d cuts, %s: %s", *cutsFlag, v, totals[v])
	}
	t.Logf("records appended %d, durable appends acknowledged before the cuts %d, unsynced bytes dropped %d", writes, durableAcks, dropped)
	for _, v := range variants {
		if totals[v].checked == 0 {
			t.Errorf("%s: no acknowledged record was checked; the test checked nothing", v)
		}
	}
}

// TestPowerLossCheckerSeesLoss makes sure the checks above can fail: a cut
// that drops more than a power cut may, from every segment that had
// durable data, must show up as lost acknowledged records. The excess is
// 4 KiB, more than the batches the four writers can have in flight
// together: a durable append whose fsync completed but whose Append had
// not yet returned at the cut is not acknowledged, so a smaller excess
// (it was 16 bytes) sometimes dropped only such batches, and the test
// failed about once in 15 runs without the checks being wrong.
func TestPowerLossCheckerSeesLoss(t *testing.T) {
	const overcut = 4096
	rng := newRand(t)
	dir := filepath.Join(workDir(t), "overcut")
	run := runSeglogLoad(t, rng, dir, seglogLoad{allDurable: true, overcut: overcut})
	if len(run.acked) == 0 {
		t.Fatal("no durable append was acknowledged before the cut")
	}
	for _, v := range variants {
		rep := newReporter(t, v)
		rep.expected = true
		c := checkSeglogCopy(t, rep, run, filepath.Join(dir, v))
		t.Logf("%s with %d durable bytes too many dropped: %s", v, overcut, c)
		if c.lost == 0 {
			t.Errorf("%s: dropping durable bytes went unnoticed: %s", v, c)
		}
	}
}

// seglogAppend is one successful Append.
type seglogAppend struct {
	writer, batch int
	base          int64
	values        []string
	durable       bool
}

// seglogRun is what one load-and-cut left for the checks.
type seglogRun struct {
	cfg      seglog.Config
	byOffset map[int64]string // every record any Append placed, before or after the cut
	acked    []seglogAppend   // durable appends that returned before the cut
	stats    cutStats
	loadFor  time.Duration
	shape    string // the load's random parameters, for the log
}

// seglogLoad varies the load for the checker's own test.
type seglogLoad struct {
	allDurable bool  // every append durable
	overcut    int64 // see powerCut.overcut
}

// runSeglogLoad appends to a log in dir/live from several goroutines and
// cuts the power at a random moment, leaving dir/truncated and dir/zeroed.
func runSeglogLoad(t *testing.T, rng *rand.Rand, dir string, opt seglogLoad) *seglogRun {
	t.Helper()
	live := filepath.Join(dir, "live")
	cfg := seglog.DefaultConfig()
	cfg.SegmentBytes = int64(8<<10 + rng.IntN(56<<10)) // rolls during the load
	cfg.IndexIntervalBytes = 256
	pc := startPowerCut(t, live)
	pc.overcut = opt.overcut
	defer pc.stop()
	l, err := seglog.Open(live, cfg, quietLogger())
	if err != nil {
		t.Fatal(err)
	}

	run := &seglogRun{cfg: cfg, byOffset: map[int64]string{}}
	durableShare := durableShares[rng.IntN(len(durableShares))]
	flushPeriod := time.Millisecond + time.Duration(rng.Int64N(int64(maxFlushPeriod)))
	run.shape = fmt.Sprintf("%.0f%% durable, flush every %v, segments of %d bytes", durableShare*100, flushPeriod.Round(time.Millisecond), cfg.SegmentBytes)
	var mu sync.Mutex // guards run.byOffset and run.acked
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := range seglogWriters {
		wrng := rand.New(rand.NewPCG(rng.Uint64(), uint64(w)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := 0; ctx.Err() == nil; b++ {
				a := seglogAppend{writer: w, batch: b, durable: opt.allDurable || wrng.Float64() < durableShare}
				recs := make([]record.Record, 1+wrng.IntN(seglogMaxBatch))
				for i := range recs {
					v := fmt.Sprintf("w%d-b%d-r%d-%s", w, b, i, padding(wrng))
					a.values = append(a.values, v)
					recs[i] = record.Record{Value: []byte(v)}
				}
				res, err := l.Append(record.NewBatch(time.Now().UnixMilli(), recs), seglog.AppendOptions{Durable: a.durable})
				if err != nil {
					t.Errorf("append: %v", err)
					return
				}
				a.base = res.BaseOffset
				if a.durable {
					pc.Ack(func() {
						mu.Lock()
						run.acked = append(run.acked, a)
						mu.Unlock()
					})
				}
				mu.Lock()
				for i, v := range a.values {
					run.byOffset[a.base+int64(i)] = v
				}
				mu.Unlock()
			}
		}()
	}
	wg.Add(1)
	go func() { // the background flusher: fsyncs and recovery points
		defer wg.Done()
		tick := time.NewTicker(flushPeriod)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if err := l.Sync(); err != nil {
					t.Errorf("sync: %v", err)
					return
				}
			}
		}
	}()

	run.loadFor = time.Duration(20+rng.IntN(230)) * time.Millisecond
	time.Sleep(run.loadFor) // the load itself: how long the log runs before the cut
	run.stats, err = pc.Cut(filepath.Join(dir, "truncated"), filepath.Join(dir, "zeroed"))
	// The log keeps taking appends after the cut for a moment: none of
	// them may reach the copies.
	time.Sleep(5 * time.Millisecond)
	cancel()
	wg.Wait()
	if cerr := l.Close(); cerr != nil {
		t.Errorf("close the live log: %v", cerr)
	}
	if err != nil {
		t.Fatalf("cut: %v", err)
	}
	return run
}

// padding makes record sizes vary, so cuts land at every kind of position.
func padding(rng *rand.Rand) string {
	const letters = "abcdefghijklmnopqrstuvwxyz"
	b := make([]byte, rng.IntN(200))
	for i := range b {
		b[i] = letters[rng.IntN(len(letters))]
	}
	return string(b)
}

// checkSeglogCopy opens a cut copy and compares it with the run.
func checkSeglogCopy(t *testing.T, rep *reporter, run *seglogRun, dir string) tally {
	t.Helper()
	where := rep.where
	l, err := seglog.Open(dir, run.cfg, quietLogger())
	if err != nil {
		// Nothing can be read: every acknowledged record is lost.
		var n int
		for _, a := range run.acked {
			n += len(a.values)
		}
		rep.report("lost", "reopen after the cut: %v", err)
		return tally{checked: n, lost: n}
	}
	defer l.Close()
	got := readLog(t, l, where)

	var c tally
	acked := map[int64]bool{}
	for _, a := range run.acked {
		for i, v := range a.values {
			off := a.base + int64(i)
			acked[off] = true
			c.checked++
			if have, ok := got[off]; !ok || have != v {
				c.lost++
				rep.report("lost", "offset %d: acknowledged %q, found %q (present %v)", off, v, have, ok)
			}
		}
	}
	seen := map[string]bool{}
	lastBatch := map[int]int{} // writer -> batch of its previous record, in offset order
	for off := l.StartOffset(); off < l.EndOffset(); off++ {
		v, ok := got[off]
		if !ok {
			c.unexpected++
			rep.report("unexpected", "offset %d missing below the log end %d", off, l.EndOffset())
			continue
		}
		if run.byOffset[off] != v {
			c.unexpected++
			rep.report("unexpected", "offset %d holds %q, appended there: %q", off, v, run.byOffset[off])
			continue
		}
		if seen[v] {
			c.duplicated++
			rep.report("duplicated", "%q again at offset %d", v, off)
		}
		seen[v] = true
		if !acked[off] {
			c.survivors++
		}
		var w, b, r int
		if _, err := fmt.Sscanf(v, "w%d-b%d-r%d-", &w, &b, &r); err == nil {
			if prev, ok := lastBatch[w]; ok && b < prev {
				c.outOfOrder++
				rep.report("out-of-order", "writer %d batch %d at offset %d after its batch %d", w, b, off, prev)
			}
			lastBatch[w] = b
		}
	}

	// The recovered log must take writes again.
	if _, err := l.Append(record.NewBatch(0, []record.Record{{Value: []byte("after")}}), seglog.AppendOptions{Durable: true}); err != nil {
		rep.report("unwritable", "durable append after recovery: %v", err)
	}
	return c
}

// readLog reads every record of l, verifying each batch's CRC.
func readLog(t *testing.T, l *seglog.Log, where string) map[int64]string {
	t.Helper()
	out := map[int64]string{}
	for off := l.StartOffset(); off < l.EndOffset(); {
		s, err := l.Read(off, 1<<20)
		if err != nil {
			t.Fatalf("%s: read at %d: %v", where, off, err)
		}
		b, err := s.Bytes()
		s.Release()
		if err != nil {
			t.Fatalf("%s: read at %d: %v", where, off, err)
		}
		if len(b) == 0 {
			t.Fatalf("%s: read at %d below the end %d returned nothing", where, off, l.EndOffset())
		}
		for len(b) > 0 {
			h, err := record.Verify(b)
			if err != nil {
				t.Fatalf("%s: batch read at %d fails verification: %v", where, off, err)
			}
			recs, err := record.Records(b[:h.Size()])
			if err != nil {
				t.Fatalf("%s: records of batch %d: %v", where, h.BaseOffset, err)
			}
			for _, r := range recs {
				out[h.BaseOffset+int64(r.OffsetDelta)] = string(r.Value)
			}
			off = h.LastOffset() + 1
			b = b[h.Size():]
		}
	}
	return out
}

// quietLogger drops seglog's info lines (segment rolls, recoveries); the
// checks say what matters.
func quietLogger() *slog.Logger {
	return slog.New(slog.DiscardHandler)
}
