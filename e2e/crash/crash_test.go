package crash

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

var (
	cycles     = flag.Int("crash.cycles", 3, "kill/restart cycles per crash test")
	producers  = flag.Int("crash.producers", 4, "concurrent producers, each with its own client")
	rate       = flag.Int("crash.rate", 50000, "records per second per producer (0: unlimited)")
	seedFlag   = flag.Uint64("crash.seed", 0, "seed for load durations (0: from the clock)")
	raceBroker = flag.Bool("crash.race", false, "build the broker with -race and fail on race reports")
	keepFiles  = flag.Bool("crash.keep", false, "keep data directories and broker logs after passing tests")
)

// topicPartitions is the partition count of every topic the tests create.
const topicPartitions = 4

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// TestCrashKeepsAckedRecords kills the broker under load and reads every
// partition back after each restart: no acknowledged record may be lost,
// none duplicated, and each producer's records stay in order per partition.
func TestCrashKeepsAckedRecords(t *testing.T) {
	h := newHarness(t)
	b := h.start()
	adm := newAdmin(t, b.addr)
	idempotent := supportsIdempotence(t, adm)
	t.Logf("idempotent producers: %v (the broker lists InitProducerId: %v)", idempotent, idempotent)

	ackedByTopic := make(map[string][]ackedRecord)
	var total verdict
	for cycle := 1; cycle <= *cycles; cycle++ {
		topic := fmt.Sprintf("crash-%03d", cycle)
		createTopic(t, adm, topic, topicPartitions)

		runFor := h.loadDuration(time.Second, 2*time.Second)
		ld := startLoad(t, b.addr, topic, *producers, idempotent, *rate)
		time.Sleep(runFor) // the load itself: how long the broker runs before the kill
		b.kill()
		led := ld.stop()
		if len(led.acked) == 0 {
			t.Fatalf("cycle %d: no record was acknowledged in %v of load (failures: %v)\n%s", cycle, runFor, led.errKind, b.logTail())
		}
		ackedByTopic[topic] = led.acked

		restartAt := time.Now()
		b = h.start()
		restart := time.Since(restartAt)
		adm = newAdmin(t, b.addr)
		readStart := time.Now()
		v := judge(t, topic, led.acked, readTopic(t, b.addr, adm, topic))
		total = total.add(v)
		t.Logf("cycle %d: load %v, killed; %s; unacked at kill (failed callbacks)=%d; restart took %v, read-back and check %v",
			cycle, runFor.Round(time.Millisecond), v, led.failed, restart.Round(time.Millisecond), time.Since(readStart).Round(time.Millisecond))
		if !v.ok() {
			t.Fatalf("cycle %d: acknowledged data damaged by the crash", cycle)
		}
	}

	// Every earlier topic went through the later recoveries too: read them
	// all once more.
	var again verdict
	for _, topic := range sortedKeys(ackedByTopic) {
		again = again.add(judge(t, topic, ackedByTopic[topic], readTopic(t, b.addr, adm, topic)))
	}
	b.stop()
	h.checkNoRaceReports()
	t.Logf("total over %d cycles: %s", *cycles, total)
	t.Logf("final re-read of all %d topics: %s", len(ackedByTopic), again)
}

// TestCrashLogEndCoversAcks kills the broker under load, on one topic
// through every cycle, and requires the restarted broker's log end offset of
// each partition to be past the highest offset ever acknowledged there.
func TestCrashLogEndCoversAcks(t *testing.T) {
	h := newHarness(t)
	b := h.start()
	adm := newAdmin(t, b.addr)
	idempotent := supportsIdempotence(t, adm)
	const topic = "crash-log-end"
	createTopic(t, adm, topic, topicPartitions)

	highestAcked := make(map[int32]int64) // over all cycles so far
	acked := 0
	for cycle := 1; cycle <= *cycles; cycle++ {
		runFor := h.loadDuration(300*time.Millisecond, 1500*time.Millisecond)
		ld := startLoad(t, b.addr, topic, *producers, idempotent, *rate)
		time.Sleep(runFor) // the load itself: how long the broker runs before the kill
		b.kill()
		led := ld.stop()
		if len(led.acked) == 0 {
			t.Fatalf("cycle %d: no record was acknowledged in %v of load (failures: %v)\n%s", cycle, runFor, led.errKind, b.logTail())
		}
		acked += len(led.acked)
		for _, a := range led.acked {
			if prev, ok := highestAcked[a.partition]; !ok || a.offset > prev {
				highestAcked[a.partition] = a.offset
			}
		}

		b = h.start()
		adm = newAdmin(t, b.addr)
		ends := logEndOffsets(t, adm, topic)
		short := 0
		for p, high := range highestAcked {
			if ends[p] < high+1 {
				short++
				t.Errorf("cycle %d: partition %d log end offset %d after restart, highest acked offset %d", cycle, p, ends[p], high)
			}
		}
		t.Logf("cycle %d: load %v, killed; %d acked; highest acked %v; log end offsets after restart %v",
			cycle, runFor.Round(time.Millisecond), len(led.acked), highestAcked, ends)
		if short > 0 {
			t.FailNow()
		}
	}
	b.stop()
	h.checkNoRaceReports()
	t.Logf("total over %d cycles: %d acked records, log end offsets covered every ack", *cycles, acked)
}

// harness owns one test's data directory, broker logs and random source.
type harness struct {
	t       *testing.T
	bin     string
	workDir string // holds data/ and the broker logs
	dataDir string
	rng     *rand.Rand
	starts  int
	brokers []*broker
	amqp    bool // start brokers with an AMQP listener too
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	if testing.Short() {
		t.Skip("crash test builds and kills the real binary; skipped with -short")
	}
	bin := wharfBinary(t)
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -crash.seed=%d), %d cycles, %d producers at up to %d records/s each", seed, seed, *cycles, *producers, *rate)

	// Not t.TempDir: a failing run keeps its files for inspection.
	workDir, err := os.MkdirTemp("", "wharf-"+t.Name()+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || *keepFiles {
			t.Logf("kept data directory and broker logs in %s", workDir)
			return
		}
		os.RemoveAll(workDir)
	})
	return &harness{
		t:       t,
		bin:     bin,
		workDir: workDir,
		dataDir: filepath.Join(workDir, "data"),
		rng:     rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
	}
}

// start runs a broker on the harness's data directory, logging to a new
// file per start.
func (h *harness) start() *broker {
	h.t.Helper()
	h.starts++
	logPath := filepath.Join(h.workDir, fmt.Sprintf("broker-%03d.log", h.starts))
	b := startBroker(h.t, h.bin, h.dataDir, logPath, h.amqp)
	h.brokers = append(h.brokers, b)
	return b
}

// loadDuration picks how long to load the broker before a kill.
func (h *harness) loadDuration(min, max time.Duration) time.Duration {
	return min + time.Duration(h.rng.Int64N(int64(max-min)))
}

func (h *harness) checkNoRaceReports() {
	h.t.Helper()
	if !*raceBroker {
		return
	}
	for _, b := range h.brokers {
		b.checkNoRaceReport()
	}
}

// logEndOffsets is the log end offset of every partition of topic.
func logEndOffsets(t *testing.T, adm *kadm.Client, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return listOffsets(t, ctx, adm.ListEndOffsets, topic)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
