package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestMedianIndexPicksMiddleThroughput(t *testing.T) {
	runs := []result{
		{bytes: 300e6, elapsed: time.Second},
		{bytes: 100e6, elapsed: time.Second},
		{bytes: 200e6, elapsed: time.Second},
	}
	if got := medianIndex(runs); got != 2 {
		t.Fatalf("medianIndex = %d, want 2 (the 200 MB/s run)", got)
	}
	if got := medianIndex(runs[:2]); got != 1 {
		t.Fatalf("medianIndex of two = %d, want 1 (the lower one)", got)
	}
}

func TestWriteTableJudgesTargets(t *testing.T) {
	sec := time.Second
	rows := []row{
		{workload: "fast", wharf: result{bytes: 70e6, records: 1000, elapsed: sec}, baseline: "disk", base: result{bytes: 100e6, elapsed: sec}, target: 0.6},
		{workload: "slow", wharf: result{bytes: 50e6, records: 1000, elapsed: sec}, baseline: "disk", base: result{bytes: 100e6, elapsed: sec}, target: 0.6},
		{workload: "info", wharf: result{bytes: 50e6, elapsed: sec}, baseline: "other", base: result{bytes: 25e6, elapsed: sec}},
	}
	var out bytes.Buffer
	writeTable(&out, rows, []string{"a note"})
	for _, want := range []string{
		"| fast | 70.0 | 1,000 | disk | 100.0 | 70.0% | ≥ 60%: met |",
		"| slow | 50.0 | 1,000 | disk | 100.0 | 50.0% | ≥ 60%: **not met** |",
		"| info | 50.0 | 0 | other | 25.0 | 200.0% | — |",
		"- a note",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

func TestThousands(t *testing.T) {
	for in, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 1234567.4: "1,234,567"} {
		if got := thousands(in); got != want {
			t.Errorf("thousands(%v) = %q, want %q", in, got, want)
		}
	}
}

func TestProduceRowsJudgeAgainstFastestBaseline(t *testing.T) {
	sec := time.Second
	wharf := result{bytes: 300e6, records: 1000, elapsed: sec}
	for _, tc := range []struct {
		name                         string
		streaming, perBatch, grouped float64
		wantStrictPrefix             string
	}{
		{"streaming fastest", 600e6, 400e6, 500e6, "disk streaming"},
		{"per-batch fastest", 400e6, 600e6, 500e6, "disk write + fdatasync"},
		{"group commit fastest", 400e6, 500e6, 600e6, "disk group commit"},
	} {
		mb := func(v float64) result { return result{bytes: int64(v), elapsed: sec} }
		rows := produceRows("p", wharf, 1<<20, mb(tc.streaming), mb(tc.perBatch), mb(tc.grouped))
		if len(rows) != 3 {
			t.Fatalf("%s: %d rows, want 3", tc.name, len(rows))
		}
		strict := rows[0]
		if !strings.HasPrefix(strict.baseline, tc.wantStrictPrefix) || !strings.HasSuffix(strict.baseline, "stricter") || strict.target == 0 {
			t.Errorf("%s: first row %+v, want the %s baseline marked stricter with the target", tc.name, strict, tc.wantStrictPrefix)
		}
		for _, r := range rows[1:] {
			if r.target != 0 {
				t.Errorf("%s: row %q carries a target", tc.name, r.baseline)
			}
		}
		if got := strict.ratio(); got != 0.5 {
			t.Errorf("%s: strict ratio %v, want 0.5", tc.name, got)
		}
	}
}
