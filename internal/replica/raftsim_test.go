package replica_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/raft"
	"github.com/wharf-mq/wharf/internal/record"
	"github.com/wharf-mq/wharf/internal/replica"
	"github.com/wharf-mq/wharf/internal/seglog"
)

// The Raft simulation: several nodes, each a raft.Host driven step by step
// (no goroutines of its own) with its replicas of several groups on real
// files, over a raft.MemNetwork under a seeded clock that drops, delays
// and duplicates batches, partitions the nodes, crashes and restarts them
// (from their files as a kill -9 leaves them, or as a power cut does: every
// file cut back to a random point at or after what its last fsync made
// durable, a torn tail), and slows their disks (a sync round finishes
// steps later). A client appends to whichever replica says it leads and
// polls the commits. Throughout and at the end a checker looks at what
// every replica holds:
//
//   - at most one leader per group and term;
//   - every acknowledged append (its Commit returned nil) is on every
//     replica at its offsets with its values, once the cluster has healed
//     and settled (below a replica's start offset only if the test's own
//     DeleteBefore removed it);
//   - every replica's committed records agree with every other's where
//     both have them: same values, same epochs, so in the same order;
//   - nothing committed that no client appended there, no append twice;
//   - a replica's high watermark never moves back while it runs, and a
//     leader never shows one below what a leader of an earlier term
//     showed.
//
// One group (compactedGroup) is a compacted topic: its records have keys,
// and now and then a replica compacts its log, during the faults. There
// an acknowledged record may be gone, but only for a later committed
// record of its key; every replica holds the same latest record of every
// key; and none holds a record of an append whose commit failed because
// its leader cut it (ErrTruncated), which was never committed.
//
// The fault schedule and the workload come from the seed; etcd raft draws
// its randomized election timeouts from crypto/rand, which no test can
// seed, and snapshot senders and forwarded proposals run on goroutines
// of their own, so a seed does not always replay the same run. Each
// step's faults are drawn from the seed and the step alone, so that the
// run's divergence does not move them: a seed replays its fault schedule
// (a fault that finds its node down, or picks the leader it finds, still
// differs).
// -raft.seeds runs more seeds, -raft.seed one of them, -raft.ticks makes
// each run longer; -test.run picks a range by name (with -raft.seeds 600,
// 'TestRaftSimulation$/seeds/^48[0-9]$' runs seeds 480 to 489).

var (
	simSeeds    = flag.Int("raft.seeds", 120, "seeds of the Raft simulation (TestRaftSimulation)")
	simSeed     = flag.Uint64("raft.seed", 0, "run only this seed of the Raft simulation")
	simTicks    = flag.Int("raft.ticks", 120, "ticks of faults and load per seed of the Raft simulation")
	simNoFaults = flag.String("raft.no", "", "debugging: faults to leave out of the Raft simulation (net,partition,crash,disk,delete,compact)")
)

const (
	stepsPerTick   = 4
	simGroups      = 3
	compactedGroup = 3 // keyed records, compacted now and then
	simKeys        = 6 // the keys of compactedGroup's records
)

func TestRaftSimulation(t *testing.T) {
	base := simBaseDir(t)
	hooks := installSimHooks(t)
	seeds := make([]uint64, 0, *simSeeds)
	if *simSeed != 0 {
		seeds = append(seeds, *simSeed)
	} else {
		for i := range *simSeeds {
			seeds = append(seeds, uint64(i+1))
		}
	}
	var totals simStats
	ran := 0 // seeds run: -test.run may pick some by name (TestRaftSimulation/seeds/^48[0-9]$)
	var mu sync.Mutex
	t.Run("seeds", func(t *testing.T) {
		for _, seed := range seeds {
			t.Run(fmt.Sprint(seed), func(t *testing.T) {
				t.Parallel()
				nodes := 3
				if seed%3 == 0 {
					nodes = 5
				}
				s := newSim(t, seed, nodes, filepath.Join(base, fmt.Sprint(seed)), hooks)
				s.run(*simTicks)
				mu.Lock()
				totals.add(s.stats)
				ran++
				mu.Unlock()
			})
		}
	})
	t.Logf("%d seeds: %s", ran, totals)
	if ran >= 20 && !t.Failed() {
		// The faults must have happened, or the checks checked little.
		for name, n := range map[string]int64{"acknowledged appends": totals.acked, "crashes with a torn tail": totals.tornCrashes,
			"snapshots installed": totals.snapshots, "divergent suffixes cut": totals.cuts, "leader changes": totals.elections,
			"appends that failed when leadership moved": totals.failed, "compaction passes that removed records": totals.compactions} {
			if n == 0 {
				t.Errorf("no %s in %d seeds", name, ran)
			}
		}
	}
}

// simBaseDir is where the simulation keeps its files: on tmpfs when there
// is one, since it fsyncs a great deal and only what it fsyncs matters.
func simBaseDir(t *testing.T) string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		dir, err := os.MkdirTemp("/dev/shm", "wharf-raftsim-")
		if err == nil {
			t.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

// simHooks records, per file (a path and its inode, since files are
// truncated, deleted and created again under the same names), how much
// its last fsync made durable.
type simHooks struct {
	mu      sync.Mutex
	durable map[fileID]int64
}

type fileID struct {
	path  string
	inode uint64
}

func idOf(path string, fi os.FileInfo) fileID {
	id := fileID{path: path}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.inode = st.Ino
	}
	return id
}

func installSimHooks(t *testing.T) *simHooks {
	h := &simHooks{durable: map[fileID]int64{}}
	t.Cleanup(seglog.SetSyncHook(func(f seglog.SyncedFile) {
		// A compacted segment is fsynced under a temporary name, then
		// renamed to its segment's (its inode goes with it).
		if path, ok := strings.CutSuffix(f.Path, ".cleaned"); ok || strings.HasSuffix(f.Path, ".log") {
			h.note(idOf(path, f.Stat), f.Stat.Size())
		}
	}))
	t.Cleanup(replica.SetStateSyncHook(func(path string, size int64) {
		if fi, err := os.Stat(path); err == nil {
			h.note(idOf(path, fi), size)
		}
	}))
	return h
}

// note records that size bytes of a file are durable.
func (h *simHooks) note(id fileID, size int64) {
	h.mu.Lock()
	h.durable[id] = size
	h.mu.Unlock()
}

// durableSize is how much of the file at path the fsyncs made durable.
func (h *simHooks) durableSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.durable[idOf(path, fi)]
}

// forget drops what was recorded of a node's files once they are copied
// away.
func (h *simHooks) forget(prefix string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id := range h.durable {
		if strings.HasPrefix(id.path, prefix) {
			delete(h.durable, id)
		}
	}
}

type sim struct {
	t    *testing.T
	seed uint64
	rng  *rand.Rand // the simulation's draws, from its goroutine only
	// faultRng is this step's fault draws, seeded by the seed and the
	// step alone: a seed replays its fault schedule (which fault, where,
	// how torn) however differently the runs went before.
	faultRng *rand.Rand
	// netRng is the network's draws (fate).
	netRng *rand.Rand
	base   string
	hooks  *simHooks
	net    *raft.MemNetwork
	nodes  []*simNode
	step   int64

	// The fault model of the run.
	dropRate, dupRate float64
	maxDelay          int64

	writes  []*simWrite
	leaders map[[2]uint64]uint64 // (group, term) -> the node seen leading it
	lastHW  map[[2]uint64]int64  // (node, group) -> high watermark last seen
	// leaderHW is, per (group, term), the highest high watermark a
	// replica leading that term showed: what a Kafka client was told.
	leaderHW map[[2]uint64]int64
	stats    simStats
	logCount *logCounter
}

type simNode struct {
	id       uint64
	dir      string
	host     *raft.Host
	logs     map[uint64]*replica.RaftLog
	down     bool
	upAt     int64          // when a down node restarts
	pending  []pendingRound // sync rounds in flight, in the order they started
	slowDisk int64          // steps a sync round takes on this node now
}

// pendingRound is a sync round in flight on a node: it ends at step due.
type pendingRound struct {
	b   *raft.SyncBatch
	due int64
}

type simWrite struct {
	id          int
	group, node uint64
	base, last  int64
	keys        [][]byte // compactedGroup's only
	values      [][]byte
	commit      replica.Commit
	acked       bool
	truncated   bool // its commit failed with ErrTruncated: never committed
	done        bool
}

type simStats struct {
	acked, failed, pending, tornCrashes, crashes, partitions, elections, snapshots, cuts, deletes, compactions int64
}

func (a *simStats) add(b simStats) {
	a.acked += b.acked
	a.failed += b.failed
	a.pending += b.pending
	a.tornCrashes += b.tornCrashes
	a.crashes += b.crashes
	a.partitions += b.partitions
	a.elections += b.elections
	a.snapshots += b.snapshots
	a.cuts += b.cuts
	a.deletes += b.deletes
	a.compactions += b.compactions
}

func (a simStats) String() string {
	return fmt.Sprintf("%d appends acknowledged, %d failed, %d undecided; %d crashes (%d with torn tails), %d partitions, "+
		"%d leader changes, %d snapshots installed, %d divergent suffixes cut, %d DeleteBefore, %d compaction passes; lost 0",
		a.acked, a.failed, a.pending, a.crashes, a.tornCrashes, a.partitions, a.elections, a.snapshots, a.cuts, a.deletes, a.compactions)
}

// maxWarnings is how many of the last warnings logCounter keeps.
const maxWarnings = 20

// logCounter counts the replicas' log lines that mark the rare paths, and
// keeps the errors and the last warnings (a snapshot chunk refused, for
// one: a follower that never catches up says why).
type logCounter struct {
	snapshots, cuts atomic.Int64
	mu              sync.Mutex
	errors          []string
	warnings        []string // the last maxWarnings, shown when the cluster does not settle
}

func (c *logCounter) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (c *logCounter) Handle(_ context.Context, r slog.Record) error {
	switch {
	case r.Level >= slog.LevelWarn:
		msg := r.Message
		r.Attrs(func(a slog.Attr) bool { msg += " " + a.String(); return true })
		c.mu.Lock()
		if r.Level >= slog.LevelError {
			c.errors = append(c.errors, msg)
		} else if c.warnings = append(c.warnings, msg); len(c.warnings) > maxWarnings {
			c.warnings = c.warnings[1:]
		}
		c.mu.Unlock()
	case strings.HasPrefix(r.Message, "installed a snapshot"):
		c.snapshots.Add(1)
	case strings.HasPrefix(r.Message, "cutting entries that diverged"):
		c.cuts.Add(1)
	}
	return nil
}
func (c *logCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *logCounter) WithGroup(string) slog.Handler      { return c }

func newSim(t *testing.T, seed uint64, nodes int, base string, hooks *simHooks) *sim {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	s := &sim{t: t, seed: seed, rng: rng, netRng: rand.New(rand.NewPCG(seed^0x5bd1e995, seed)), base: base, hooks: hooks, net: raft.NewMemNetwork(),
		leaders: map[[2]uint64]uint64{}, lastHW: map[[2]uint64]int64{}, leaderHW: map[[2]uint64]int64{}, logCount: &logCounter{}}
	s.dropRate = []float64{0, 0.02, 0.1, 0.25}[rng.IntN(4)]
	s.dupRate = []float64{0, 0.02, 0.1}[rng.IntN(3)]
	s.maxDelay = int64(rng.IntN(8))
	if strings.Contains(*simNoFaults, "net") {
		s.dropRate, s.dupRate, s.maxDelay = 0, 0, 0
	}
	s.net.SetFault(s.fate)
	t.Cleanup(s.close)
	for i := range nodes {
		s.nodes = append(s.nodes, &simNode{id: uint64(i + 1), dir: filepath.Join(base, fmt.Sprintf("node%d", i+1))})
	}
	for _, n := range s.nodes {
		s.start(n)
	}
	return s
}

func (s *sim) members() []uint64 {
	ids := make([]uint64, len(s.nodes))
	for i, n := range s.nodes {
		ids[i] = n.id
	}
	return ids
}

// fate draws what the network does to a batch (under the network's lock,
// from the host loops and the snapshot senders: so from netRng, which
// nothing else draws from).
func (s *sim) fate(from, to uint64) raft.Fate {
	f := raft.Fate{Delay: s.netRng.Int64N(s.maxDelay + 1)}
	f.Drop = s.netRng.Float64() < s.dropRate
	if s.netRng.Float64() < s.dupRate {
		f.Duplicate, f.DupDelay = true, s.netRng.Int64N(s.maxDelay+3)
	}
	return f
}

// start starts a node's host and opens its replicas from its directory.
func (s *sim) start(n *simNode) {
	h, err := raft.NewHost(raft.Config{NodeID: n.id, Transport: s.net.Transport(n.id), Logger: slog.New(s.logCount)})
	if err != nil {
		s.t.Fatal(err)
	}
	n.host, n.down, n.pending = h, false, nil
	n.logs = map[uint64]*replica.RaftLog{}
	logger := slog.New(s.logCount)
	for g := uint64(1); g <= simGroups; g++ {
		cfg := replica.DefaultConfig()
		cfg.SegmentBytes = 2048
		if g == compactedGroup {
			cfg.Compact, cfg.Delete, cfg.MinCleanableDirtyRatio = true, false, 0
			cfg.SegmentBytes = 512 // closed segments above the anchor too
		}
		l, err := replica.OpenRaft(filepath.Join(n.dir, fmt.Sprint(g)), cfg, replica.RaftOptions{
			Host: h, Group: g, Members: s.members(), Window: 8, Logger: logger})
		if err != nil {
			s.t.Fatalf("seed %d step %d: node %d group %d does not open: %v", s.seed, s.step, n.id, g, err)
		}
		n.logs[g] = l
		delete(s.lastHW, [2]uint64{n.id, g})
	}
	s.net.Register(n.id, h)
}

// stop closes a node's replicas and host; its files stay as they are.
func (s *sim) stop(n *simNode) {
	s.net.Unregister(n.id)
	for _, l := range n.logs {
		l.Close()
	}
	n.host.Close()
	n.down = true
}

func (s *sim) close() {
	for _, n := range s.nodes {
		if !n.down {
			s.stop(n)
		}
	}
}

func (s *sim) run(ticks int) {
	for range ticks * stepsPerTick {
		s.faults()
		s.clientWrites()
		s.advance()
	}
	s.settle()
	s.check()
	if len(s.logCount.errors) > 0 {
		s.t.Fatalf("seed %d: errors logged:\n%s", s.seed, strings.Join(s.logCount.errors, "\n"))
	}
	s.stats.snapshots = s.logCount.snapshots.Load()
	s.stats.cuts = s.logCount.cuts.Load()
	for _, w := range s.writes {
		if !w.done {
			s.stats.pending++
		}
	}
}

// advance runs one step: sync rounds that are due, every node's work, the
// network, and every stepsPerTick steps a tick.
func (s *sim) advance() {
	s.step++
	for _, n := range s.nodes {
		if n.down {
			continue
		}
		s.endRounds(n)
		if b := n.host.Process(); b != nil {
			// A round may end before an earlier one: its fsync was quicker.
			n.pending = append(n.pending, pendingRound{b: b, due: s.step + s.rng.Int64N(n.slowDisk+1)})
		}
	}
	s.net.Flush(s.step)
	if s.step%stepsPerTick == 0 {
		for _, n := range s.nodes {
			if !n.down {
				n.host.Tick()
			}
		}
	}
	s.observe()
}

// endRounds ends, in a random order, the sync rounds of n that are due.
func (s *sim) endRounds(n *simNode) {
	var due []pendingRound
	n.pending = slices.DeleteFunc(n.pending, func(r pendingRound) bool {
		if s.step >= r.due {
			due = append(due, r)
			return true
		}
		return false
	})
	s.rng.Shuffle(len(due), func(i, j int) { due[i], due[j] = due[j], due[i] })
	for _, r := range due {
		r.b.Run(1)
		n.host.Synced(r.b)
	}
}

// faults injects this step's faults.
func (s *sim) faults() {
	s.faultRng = rand.New(rand.NewPCG(s.seed^0x2545f4914f6cdd1d, uint64(s.step)))
	r := s.faultRng.Float64()
	for i, f := range []string{"partition", "partition", "crash", "disk", "delete", "compact"} {
		if strings.Contains(*simNoFaults, f) && r >= []float64{0, 0.004, 0.010, 0.013, 0.016, 0.018}[i] && r < []float64{0.004, 0.010, 0.013, 0.016, 0.018, 0.030}[i] {
			r = 1
		}
	}
	switch {
	case r < 0.004:
		s.partition()
	case r < 0.010:
		s.heal()
	case r < 0.013:
		s.crash(s.nodes[s.faultRng.IntN(len(s.nodes))], s.faultRng.IntN(2) == 0)
	case r < 0.016:
		n := s.nodes[s.faultRng.IntN(len(s.nodes))]
		n.slowDisk = []int64{0, 0, 2, 8}[s.faultRng.IntN(4)]
	case r < 0.018:
		s.deleteSome()
	case r < 0.030:
		s.compactSome()
	}
	for _, n := range s.nodes {
		if n.down && s.step >= n.upAt && s.upCount() < len(s.nodes) {
			s.start(n)
		}
	}
}

func (s *sim) upCount() int {
	up := 0
	for _, n := range s.nodes {
		if !n.down {
			up++
		}
	}
	return up
}

// partition cuts the nodes into two sides; half the time one side is a
// leader alone (with the minority, its writes must never commit).
func (s *sim) partition() {
	s.heal()
	s.stats.partitions++
	side := map[uint64]bool{}
	if s.faultRng.IntN(2) == 0 {
		for _, n := range s.nodes {
			if !n.down {
				if st := n.logs[uint64(1+s.faultRng.IntN(simGroups))].Group().Status(); st.Leader == n.id {
					side[n.id] = true
					break
				}
			}
		}
	}
	if len(side) == 0 {
		for _, n := range s.nodes {
			if s.faultRng.IntN(2) == 0 {
				side[n.id] = true
			}
		}
	}
	for _, a := range s.nodes {
		for _, b := range s.nodes {
			if side[a.id] != side[b.id] {
				s.net.Cut(a.id, b.id, true)
			}
		}
	}
}

func (s *sim) heal() {
	for _, a := range s.nodes {
		for _, b := range s.nodes {
			s.net.Cut(a.id, b.id, false)
		}
	}
}

// crash stops a node as a kill -9 does, or as a power cut does if torn:
// its files are copied as they are (the page cache survives a kill), or
// with each file cut back to a random point at or after the durable part;
// the node restarts later from the copy.
func (s *sim) crash(n *simNode, torn bool) {
	if n.down || s.upCount() <= len(s.nodes)/2 {
		return
	}
	s.stats.crashes++
	if torn {
		s.stats.tornCrashes++
	}
	copyDir := filepath.Join(s.base, fmt.Sprintf("node%d-at-%d", n.id, s.step))
	err := filepath.WalkDir(n.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(n.dir, path)
		to := filepath.Join(copyDir, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		tracked := strings.HasSuffix(path, ".log") || strings.HasSuffix(path, "raft-state")
		if tracked && torn {
			durable := min(s.hooks.durableSize(path), int64(len(b)))
			b = b[:durable+s.faultRng.Int64N(int64(len(b))-durable+1)]
		}
		if err := os.WriteFile(to, b, 0o644); err != nil || !tracked {
			return err
		}
		// What is on the disk after the crash stays there.
		fi, err := os.Stat(to)
		if err == nil {
			s.hooks.note(idOf(to, fi), int64(len(b)))
		}
		return err
	})
	if err != nil {
		s.t.Fatal(err)
	}
	s.stop(n)
	s.hooks.forget(n.dir + string(filepath.Separator))
	os.RemoveAll(n.dir)
	n.dir = copyDir
	n.upAt = s.step + int64(s.faultRng.IntN(60*stepsPerTick))
}

// deleteSome has a replica delete its records below a point under its high
// watermark, so that followers behind it catch up from a snapshot that
// starts further on.
func (s *sim) deleteSome() {
	n := s.nodes[s.faultRng.IntN(len(s.nodes))]
	if n.down {
		return
	}
	l := n.logs[uint64(1+s.faultRng.IntN(simGroups-1))] // not compactedGroup, whose checks need every key's latest record
	if hw := l.HighWatermark(); hw > l.StartOffset() {
		if _, err := l.DeleteBefore(l.StartOffset() + s.faultRng.Int64N(hw-l.StartOffset()+1)); err != nil {
			s.t.Fatalf("seed %d: DeleteBefore: %v", s.seed, err)
		}
		s.stats.deletes++
	}
}

// compactSome has a replica of compactedGroup run a compaction pass.
func (s *sim) compactSome() {
	n := s.nodes[s.faultRng.IntN(len(s.nodes))]
	if n.down {
		return
	}
	st, err := n.logs[compactedGroup].Compact(context.Background(), time.UnixMilli(s.step))
	if err != nil {
		s.t.Fatalf("seed %d step %d: node %d compacts: %v", s.seed, s.step, n.id, err)
	}
	if st.RecordsRemoved > 0 {
		s.stats.compactions++
	}
}

// clientWrites appends to the groups now and then, on a replica that says
// it leads (there may be two, one of them deposed and not yet aware).
func (s *sim) clientWrites() {
	for g := uint64(1); g <= simGroups; g++ {
		if s.rng.Float64() > 0.3 {
			continue
		}
		var leaders []*simNode
		for _, n := range s.nodes {
			if !n.down && n.logs[g].Group().Status().Leading() {
				leaders = append(leaders, n)
			}
		}
		if len(leaders) == 0 {
			continue
		}
		n := leaders[s.rng.IntN(len(leaders))]
		w := &simWrite{id: len(s.writes), group: g, node: n.id}
		recs := make([]record.Record, 1+s.rng.IntN(3))
		for i := range recs {
			v := fmt.Appendf(nil, "g%d-w%d-%d", g, w.id, i)
			recs[i] = record.Record{Value: v}
			if g == compactedGroup {
				recs[i].Key = fmt.Appendf(nil, "k%d", s.rng.IntN(simKeys))
				w.keys = append(w.keys, recs[i].Key)
			}
			w.values = append(w.values, v)
		}
		a, err := n.logs[g].Append(record.NewBatch(int64(s.step), recs), replica.AppendOptions{AckCommitted: true})
		if err != nil {
			if !errors.Is(err, replica.ErrNotLeader) && !errors.Is(err, replica.ErrAppendRefused) {
				s.t.Fatalf("seed %d: append on node %d: %v", s.seed, n.id, err)
			}
			continue
		}
		w.base, w.last, w.commit = a.BaseOffset, a.LastOffset, a.Ack
		s.writes = append(s.writes, w)
	}
}

var cancelled = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// observe checks what can be checked at every step: one leader per term,
// high watermarks that do not move back; and polls the commits.
func (s *sim) observe() {
	for _, n := range s.nodes {
		if n.down {
			continue
		}
		for g, l := range n.logs {
			st := l.Group().Status()
			if st.Role.String() == "StateLeader" {
				key := [2]uint64{g, st.Term}
				if other, ok := s.leaders[key]; ok && other != n.id {
					s.t.Fatalf("seed %d step %d: group %d has two leaders in term %d: nodes %d and %d (stats %s)", s.seed, s.step, g, st.Term, other, n.id, s.stats)
				} else if !ok {
					s.leaders[key] = n.id
					s.stats.elections++
				}
			}
			key := [2]uint64{n.id, g}
			hw := l.HighWatermark()
			if prev, ok := s.lastHW[key]; ok && hw < prev {
				s.t.Fatalf("seed %d step %d: node %d group %d high watermark moved back from %d to %d", s.seed, s.step, n.id, g, prev, hw)
			}
			s.lastHW[key] = hw
			if st.Leading() {
				s.checkLeaderHW(g, st.Term, n.id, hw)
			}
		}
	}
	for _, w := range s.writes {
		if w.done {
			continue
		}
		switch err := w.commit.Wait(cancelled); {
		case err == nil:
			w.done, w.acked = true, true
			s.stats.acked++
		case errors.Is(err, context.Canceled):
		case errors.Is(err, replica.ErrNotLeader), errors.Is(err, replica.ErrTruncated), errors.Is(err, replica.ErrClosed):
			w.done, w.truncated = true, errors.Is(err, replica.ErrTruncated)
			s.stats.failed++
		default:
			s.t.Fatalf("seed %d: commit of write %d: %v", s.seed, w.id, err)
		}
	}
}

// checkLeaderHW fails the run if the high watermark a replica shows while
// it leads term is below one a leader of an earlier term showed: a Kafka
// client reading up to the high watermark (ListOffsets, Fetch) would see
// acknowledged records vanish until the new leader catches up. Kafka's
// new leader never answers with a lower one either (KIP-207).
func (s *sim) checkLeaderHW(g, term, node uint64, hw int64) {
	for key, shown := range s.leaderHW {
		if key[0] == g && key[1] < term && shown > hw {
			s.t.Fatalf("seed %d step %d: group %d: node %d leads term %d with high watermark %d, below the %d the leader of term %d showed",
				s.seed, s.step, g, node, term, hw, shown, key[1])
		}
	}
	key := [2]uint64{g, term}
	s.leaderHW[key] = max(s.leaderHW[key], hw)
}

// settle heals everything, restarts the nodes that are down, and runs
// without faults until every group has a leader whose log is all
// committed and every replica has all of it.
func (s *sim) settle() {
	s.heal()
	s.dropRate, s.dupRate = 0, 0
	for _, n := range s.nodes {
		n.slowDisk = 0
		if n.down {
			s.start(n)
		}
	}
	for range 4000 * stepsPerTick {
		s.advance()
		if s.settled() {
			// Poll once more: commits complete on the step that settles.
			s.observe()
			return
		}
	}
	var state []string
	for _, n := range s.nodes {
		for g := uint64(1); g <= simGroups; g++ {
			l := n.logs[g]
			state = append(state, fmt.Sprintf("node %d group %d: %+v hw %d end %d start %d quiesced %v %s",
				n.id, g, l.Group().Status(), l.HighWatermark(), l.EndOffset(), l.StartOffset(), l.Group().Quiesced(), l.SnapshotState()))
			progress := l.Group().ProgressStates()
			for _, id := range slices.Sorted(maps.Keys(progress)) {
				state = append(state, fmt.Sprintf("    progress of node %d: %s", id, progress[id]))
			}
		}
	}
	s.t.Fatalf("seed %d: the cluster did not settle:\n%s\nerrors logged:\n%s\nlast warnings:\n%s", s.seed, strings.Join(state, "\n"),
		strings.Join(s.logCount.errors, "\n"), strings.Join(s.logCount.warnings, "\n"))
}

func (s *sim) settled() bool {
	for g := uint64(1); g <= simGroups; g++ {
		var leader *replica.RaftLog
		for _, n := range s.nodes {
			if l := n.logs[g]; l.Group().Status().Leading() {
				leader = l
			}
		}
		if leader == nil || leader.HighWatermark() != leader.EndOffset() {
			return false
		}
		for _, n := range s.nodes {
			if n.logs[g].HighWatermark() != leader.EndOffset() {
				return false
			}
		}
	}
	return true
}

// simRecord is one committed record as a replica holds it.
type simRecord struct {
	key, value []byte
	epoch      int32
}

// check compares every replica with the acknowledged appends and with
// each other.
func (s *sim) check() {
	byValue := map[string]*simWrite{}
	for _, w := range s.writes {
		for _, v := range w.values {
			byValue[string(v)] = w
		}
	}
	for g := uint64(1); g <= simGroups; g++ {
		logs := map[uint64]map[int64]simRecord{}
		for _, n := range s.nodes {
			logs[n.id] = s.committed(n.logs[g])
		}
		// Nothing unexpected, nothing twice.
		seen := map[string]int64{}
		for id, recs := range logs {
			for off, r := range recs {
				w := byValue[string(r.value)]
				if w == nil || w.group != g || off < w.base || off > w.last || !bytes.Equal(w.values[off-w.base], r.value) {
					s.t.Fatalf("seed %d: node %d group %d holds %q at %d, which no client appended there", s.seed, id, g, r.value, off)
				}
				if prev, ok := seen[string(r.value)]; ok && prev != off {
					s.t.Fatalf("seed %d: group %d holds %q at %d and at %d", s.seed, g, r.value, prev, off)
				}
				if w.truncated {
					s.t.Fatalf("seed %d: node %d group %d holds %q at %d, which its leader cut (never committed)", s.seed, id, g, r.value, off)
				}
				if g == compactedGroup && !bytes.Equal(w.keys[off-w.base], r.key) {
					s.t.Fatalf("seed %d: node %d group %d holds %q at %d under key %q, appended under %q", s.seed, id, g, r.value, off, r.key, w.keys[off-w.base])
				}
				seen[string(r.value)] = off
			}
		}
		// The replicas agree wherever both hold a record.
		for a, ra := range logs {
			for b, rb := range logs {
				for off, x := range ra {
					if y, ok := rb[off]; ok && (!bytes.Equal(x.value, y.value) || x.epoch != y.epoch) {
						s.t.Fatalf("seed %d: group %d offset %d: node %d holds %q (epoch %d), node %d %q (epoch %d)",
							s.seed, g, off, a, x.value, x.epoch, b, y.value, y.epoch)
					}
				}
			}
		}
		// Every replica holds the same latest record of every key, so
		// compaction removed only records a later one of their key
		// superseded.
		latest := map[uint64]map[string]int64{}
		for id, recs := range logs {
			latest[id] = latestByKey(recs)
		}
		for id := range logs {
			if g == compactedGroup && !maps.Equal(latest[id], latest[s.nodes[0].id]) {
				s.t.Fatalf("seed %d: group %d: node %d holds the latest records of the keys at %v, node %d at %v",
					s.seed, g, id, latest[id], s.nodes[0].id, latest[s.nodes[0].id])
			}
		}
		// Nothing acknowledged is lost.
		for _, w := range s.writes {
			if w.group != g || !w.acked {
				continue
			}
			for _, n := range s.nodes {
				l := n.logs[g]
				for i, v := range w.values {
					off := w.base + int64(i)
					if off < l.StartOffset() {
						continue // deleted by the test's DeleteBefore
					}
					if g == compactedGroup && latest[n.id][string(w.keys[i])] > off {
						continue // superseded: compaction may have removed it
					}
					if r, ok := logs[n.id][off]; !ok || !bytes.Equal(r.value, v) {
						s.t.Fatalf("seed %d: acknowledged %q at group %d offset %d is missing on node %d (it holds %q)",
							s.seed, v, g, off, n.id, r.value)
					}
				}
			}
		}
	}
}

// latestByKey is, for every key of recs, the offset of its latest record.
func latestByKey(recs map[int64]simRecord) map[string]int64 {
	out := map[string]int64{}
	for off, r := range recs {
		if r.key != nil {
			out[string(r.key)] = max(out[string(r.key)], off)
		}
	}
	return out
}

// committed reads a replica's committed records.
func (s *sim) committed(l *replica.RaftLog) map[int64]simRecord {
	out := map[int64]simRecord{}
	for next := l.StartOffset(); next < l.HighWatermark(); {
		sl, err := l.Read(next, 1<<20)
		if err != nil {
			s.t.Fatalf("seed %d: read at %d: %v", s.seed, next, err)
		}
		b, err := sl.Bytes()
		sl.Release()
		if err != nil || len(b) == 0 {
			s.t.Fatalf("seed %d: read at %d: %d bytes, %v", s.seed, next, len(b), err)
		}
		for len(b) > 0 {
			h, err := record.Verify(b)
			if err != nil {
				s.t.Fatalf("seed %d: a committed batch at %d fails its check: %v", s.seed, next, err)
			}
			recs, err := record.Records(b[:h.Size()])
			if err != nil {
				s.t.Fatal(err)
			}
			for i, r := range recs {
				if off := h.BaseOffset + int64(i); off >= l.StartOffset() {
					out[off] = simRecord{key: slices.Clone(r.Key), value: slices.Clone(r.Value), epoch: h.PartitionLeaderEpoch}
				}
			}
			next = h.LastOffset() + 1
			b = b[h.Size():]
		}
	}
	return out
}
