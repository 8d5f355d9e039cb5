package main

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSegmentFilesRollSyncsAndRemovesTheClosedSegment(t *testing.T) {
	parent := t.TempDir()
	segs, err := newSegmentFiles(parent)
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

func TestDiskLimitIsTheBetterMethod(t *testing.T) {
	s := &suite{medians: map[string]figures{}}
	if _, v := s.diskLimit(); !math.IsNaN(v) {
		t.Errorf("no method measured: limit %v, want NaN", v)
	}
	s.medians[limitDiskPerBatch] = figures{"mbps": 300}
	if name, v := s.diskLimit(); v != 300 || name != "fdatasync per 1 MiB append" {
		t.Errorf("one method: %q %v", name, v)
	}
	s.medians[limitDiskGroup] = figures{"mbps": 450}
	if name, v := s.diskLimit(); v != 450 || name != "group-commit appends" {
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
