package reliability

import (
	"flag"
	"math/rand/v2"
	"os"
	"testing"
	"time"
)

// Flags for the long versions; doc.go lists them with their defaults.
var (
	cutsFlag       = flag.Int("reliability.cuts", 12, "power cuts of the seglog-level power-loss test")
	brokerCutsFlag = flag.Int("reliability.broker-cuts", 2, "power cuts of the node-level power-loss test")
	connsFlag      = flag.Int("reliability.conns", 2000, "idle connections the bad-input test opens (half per protocol)")
	fdLimitFlag    = flag.Int("reliability.fd-limit", 256, "open-file limit of the broker in the file-descriptor tests (they open 150 connections more)")
	badRoundsFlag  = flag.Int("reliability.bad-rounds", 1, "rounds of garbage the bad-input test throws at each port")
	fullFlag       = flag.Int("reliability.disk-fill-rounds", 1, "fill/free rounds of the disk-full test")
	fuzzTimeFlag   = flag.Duration("reliability.fuzztime", 0, "run every fuzz target of the module for this long each (0: skip; the seed corpora run in the normal go test)")
	seedFlag       = flag.Uint64("reliability.seed", 0, "seed for random choices (0: from the clock; logged)")
	keepFlag       = flag.Bool("reliability.keep", false, "keep the copies of cut data directories even when the test passes")
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	removeWharfBinary()
	os.Exit(code)
}

// newRand returns the test's random source and logs its seed.
func newRand(t *testing.T) *rand.Rand {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -reliability.seed=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// workDir is a directory for copies of data directories. Unlike
// t.TempDir it survives a failing test (or -reliability.keep), so the
// files that failed can be looked at.
func workDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "wharf-reliability-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || *keepFlag {
			t.Logf("kept %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	return dir
}

// waitFor polls cond every 20 ms until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}
