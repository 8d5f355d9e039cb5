package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSegmentFilesRollSyncsAndRemovesTheClosedSegment(t *testing.T) {
	parent := t.TempDir()
	segs, err := newSegmentFiles(parent, false)
	if err != nil {
		t.Fatal(err)
	}
	if segs.full(segmentBytes) {
		t.Error("an empty segment must take one append of any size")
	}
	first := segs.active.Name()
	if _, err := segs.active.Write([]byte("batch")); err != nil {
		t.Fatal(err)
	}
	segs.size += 5
	if !segs.full(segmentBytes) {
		t.Error("a segment holding data must not take an append past segmentBytes")
	}
	if err := segs.roll(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(first); !os.IsNotExist(err) {
		t.Errorf("closed segment still there after roll: %v", err)
	}
	if segs.size != 0 || filepath.Base(segs.active.Name()) != "00000000000000000001.log" {
		t.Errorf("after roll: active %s, size %d", segs.active.Name(), segs.size)
	}
	segs.close()
	if entries, _ := os.ReadDir(parent); len(entries) != 0 {
		t.Errorf("close left %d entries in the parent directory", len(entries))
	}
}

// Both disk-limit methods measure something and leave nothing behind.
func TestDiskLimitMethodsReportAndCleanUp(t *testing.T) {
	s := &suite{opts: options{warmup: 20 * time.Millisecond, duration: 100 * time.Millisecond}, work: t.TempDir()}
	for name, run := range map[string]func(context.Context, int) (figures, error){
		"per batch":    s.runDiskSync,
		"group commit": s.runDiskGroupCommit,
	} {
		f, err := run(context.Background(), 64<<10)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !(f["mbps"] > 0) || !(f["ops"] > 0) {
			t.Errorf("%s: figures %v, want positive mbps and ops", name, f)
		}
		if entries, _ := os.ReadDir(s.work); len(entries) != 0 {
			t.Errorf("%s left %d entries behind", name, len(entries))
		}
	}
}

// Writers at once each append to files of their own and leave nothing
// behind. (Whether a round ends inside so short a window depends on the
// disk's load, so the figures are not checked.)
func TestDiskGroupCommitWritersCleanUp(t *testing.T) {
	s := &suite{opts: options{warmup: 20 * time.Millisecond, duration: 100 * time.Millisecond}, work: t.TempDir()}
	f, err := s.runDiskGroupCommitWriters(context.Background(), 64<<10, 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f["mbps"]; !ok {
		t.Errorf("figures %v lack mbps", f)
	}
	if entries, _ := os.ReadDir(s.work); len(entries) != 0 {
		t.Errorf("three writers left %d entries behind", len(entries))
	}
}

func TestDiskLimitIsTheBetterMethod(t *testing.T) {
	s := &suite{medians: map[string]figures{}}
	if _, v := s.diskLimit(""); !math.IsNaN(v) {
		t.Errorf("no method measured: limit %v, want NaN", v)
	}
	s.medians[limitDiskPerBatch] = figures{"mbps": 300}
	if name, v := s.diskLimit(""); v != 300 || name != "fdatasync per 1 MiB append" {
		t.Errorf("one method: %q %v", name, v)
	}
	s.medians[limitDiskGroup] = figures{"mbps": 450}
	if name, v := s.diskLimit(""); v != 450 || name != "group-commit appends" {
		t.Errorf("two methods: %q %v, want the group-commit figure", name, v)
	}

	s.medians[produceAllKiB.String()+"|Wharf"] = figures{"mbps": 430}
	s.limitRows(produceAllKiB, produceOneKiB)
	if len(s.rows) != 1 {
		t.Fatalf("want one limit row (no loopback figure), got %d", len(s.rows))
	}
	r := s.rows[0]
	if r.PeerValue != 450 || !strings.Contains(r.Peer, "group-commit") || r.Target != diskLimitTarget {
		t.Errorf("limit row %+v", r)
	}
	if !strings.Contains(r.Notes, "fdatasync per 1 MiB append 300 MB/s") {
		t.Errorf("the notes should give both methods' figures: %s", r.Notes)
	}
}

// A comparison's limits take their turns in every run, after Wharf and
// the peer, and make no rows of their own.
func TestComparisonRunsLimitsInTheSameTurns(t *testing.T) {
	s := &suite{opts: options{runs: 3}, progress: io.Discard, medians: map[string]figures{}, runs: map[string][]figures{}}
	var turns []string
	side := func(name string, rate float64) contender {
		return contender{name: name, run: func(context.Context) (figures, error) {
			turns = append(turns, name)
			return figures{"rate": rate}, nil
		}}
	}
	peer := side("peer", 2)
	err := s.compare(context.Background(), comparison{
		workload: "w",
		metrics:  []metric{{key: "rate", label: "throughput", unit: msgsPerSec}},
		wharf:    side("Wharf", 1),
		peer:     &peer,
		limits:   []contender{side("limit", 3)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(turns, " "), "Wharf peer limit Wharf peer limit Wharf peer limit"; got != want {
		t.Errorf("turns %q, want %q", got, want)
	}
	if len(s.rows) != 1 || s.rows[0].PeerValue != 2 {
		t.Errorf("rows %+v, want one, against the peer", s.rows)
	}
	if f := s.medians["w|limit"]; f["rate"] != 3 {
		t.Errorf("the limit's medians %v, want kept for the limit rows", f)
	}
	if runs := s.runs["w|limit"]; len(runs) != 3 {
		t.Errorf("the limit's runs %v, want all three kept", runs)
	}
}

// The acks=all limit row takes the disk limit measured in the same turns
// as Wharf's runs over the limits section's, and says so.
func TestLimitRowPrefersTheSameTurnLimit(t *testing.T) {
	s := &suite{medians: map[string]figures{limitDiskGroup: {"mbps": 600}}}
	w := produceAllKiB.String()
	s.medians[w+"|Wharf"] = figures{"mbps": 430, "cpu": 0.4, "selfcpu": 0.5, "rounds": 200, "roundmb": 2.15, "fsyncbusy": 0.97}
	s.medians[w+"|group-commit appends"] = figures{"mbps": 450, "selfcpu": 0.9, "ops": 300}
	s.medians[w+"|fdatasync per 1 MiB append"] = figures{"mbps": 440}
	s.limitRows(produceAllKiB, produceOneKiB)
	if len(s.rows) != 1 {
		t.Fatalf("want one limit row, got %d", len(s.rows))
	}
	r := s.rows[0]
	if r.PeerValue != 450 || !strings.Contains(r.Peer, "group-commit") {
		t.Errorf("limit row %+v, want the same-turn group-commit figure", r)
	}
	s.rows = nil
	s.medians[w+"|"+busyCoreLimitName] = figures{"mbps": 400}
	s.medians[w+"|"+bareKafkaName] = figures{"mbps": 440, "cpu": 0.5}
	s.runs = map[string][]figures{
		w + "|Wharf":                {{"mbps": 300}, {"mbps": 430}},
		w + "|group-commit appends": {{"mbps": 400}, {"mbps": 450}},
	}
	s.limitRows(produceAllKiB, produceOneKiB)
	r = s.rows[0]
	if r.PeerValue != 450 {
		t.Errorf("the limit with a core busy is a note, not the limit: %+v", r)
	}
	for _, want := range []string{"same turns as Wharf's runs", "fdatasync per 1 MiB append 440 MB/s", "the limit's appends 0.9",
		"spinning on one core meanwhile, group-commit appends give 400 MB/s: Wharf 1.07× of that",
		"run by run: 0.75×, 0.96×",
		"nothing else) and its process's 0.500 cores busy give 440 MB/s: Wharf 0.98× of that",
		"fdatasync rounds: Wharf 200/s of 2.15 MB, one in flight 97.0% of the time; the limit 300/s of 1.50 MB"} {
		if !strings.Contains(r.Notes, want) {
			t.Errorf("notes lack %q: %s", want, r.Notes)
		}
	}
}

// The busy-core limit measures, and returns only once its spinner has
// stopped (a spinner that never stopped would hang the run). The window
// is long enough for an fdatasync to finish on a loaded machine with one
// of its cores taken by the spinner.
func TestBusyCoreDiskLimitMeasuresAndStops(t *testing.T) {
	s := &suite{opts: options{warmup: 20 * time.Millisecond, duration: time.Second}, work: t.TempDir()}
	f, err := s.busyCoreDiskLimit().run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !(f["mbps"] > 0) || !(f["ops"] > 0) {
		t.Errorf("figures %v, want positive mbps and ops", f)
	}
	if entries, _ := os.ReadDir(s.work); len(entries) != 0 {
		t.Errorf("the run left %d entries behind", len(entries))
	}
}

// Wharf's group-commit counters come from its /metrics text, and a
// window's figures from their change across it.
func TestCommitFiguresFromMetrics(t *testing.T) {
	read := func(text string) figures {
		t.Helper()
		f, err := parseCommitCounters(bufio.NewScanner(strings.NewReader(text)))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	start := read("# HELP x\nwharf_fsync_duration_seconds_sum 1.5\nwharf_fsync_duration_seconds_count 100\nwharf_group_commit_offsets_sum 1000\nwharf_group_commit_offsets_count 100\n")
	end := read("wharf_fsync_duration_seconds_sum 3.4\nwharf_fsync_duration_seconds_count 600\nwharf_group_commit_offsets_sum 1.201e+06\n")
	w := window{start: time.Unix(0, 0), end: time.Unix(2, 0)}
	f := commitFigures(start, end, w, 1000)
	if f["rounds"] != 250 || math.Abs(f["fsyncbusy"]-0.95) > 1e-9 || f["roundmb"] != 2.4 {
		t.Errorf("figures %v, want 250 rounds/s, 0.95 busy, 2.4 MB a round", f)
	}
	if _, err := parseCommitCounters(bufio.NewScanner(strings.NewReader("wharf_fsync_duration_seconds_count 1\n"))); err == nil {
		t.Error("missing counters: want an error")
	}
}

// A follower's segment written past the page cache holds what was
// written, across a roll. t.TempDir is on a disk here (ext4), which takes
// O_DIRECT; the test says so when it is not.
func TestSegmentFilesWriteDirect(t *testing.T) {
	segs, err := newSegmentFiles(t.TempDir(), true)
	if err != nil {
		t.Fatal(err)
	}
	defer segs.close()
	if segs.direct == nil {
		t.Fatal("the test directory's file system refused O_DIRECT: this test needs one on a disk")
	}
	buf := alignedBuffer(2 * directBlock)
	for i := range buf {
		buf[i] = byte(i)
	}
	for range 2 {
		if err := segs.write(buf); err != nil {
			t.Fatal(err)
		}
		segs.size += int64(len(buf))
	}
	got, err := os.ReadFile(segs.active.Name())
	if err != nil {
		t.Fatal(err)
	}
	if want := append(slices.Clone(buf), buf...); !bytes.Equal(got, want) {
		t.Fatalf("segment holds %d bytes, not the %d written twice", len(got), len(buf))
	}
	if err := segs.roll(); err != nil {
		t.Fatal(err)
	}
	if segs.direct == nil {
		t.Error("the next segment is not written past the page cache")
	}
}
