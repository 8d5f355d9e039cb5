package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A replica's disk limit is its share of what the writers appended
// together, in records of the cluster workload's size.
func TestReplicaShare(t *testing.T) {
	f := replicaShare(figures{"mbps": 600, "ops": 900}, 3)
	if f["summbps"] != 600 || f["mbps"] != 200 || f["rate"] != 200e6/1024 {
		t.Errorf("share of three writers at 600 MB/s: %v", f)
	}
}

// clusterMedians fills s with the medians and runs of the cluster produce
// comparison: RF3 at 150 MB/s, RF1 at 600, three writers 510 MB/s
// together, one writer 620.
func clusterMedians(s *suite, workload string) {
	put := func(side string, runs ...figures) {
		s.runs[workload+"|"+side] = runs
		s.medians[workload+"|"+side] = medianFigures(runs)
	}
	put(rf3Side, figures{"rate": 150e6 / 1024, "mbps": 150}, figures{"rate": 160e6 / 1024, "mbps": 160})
	put(rf1Side, figures{"rate": 600e6 / 1024, "mbps": 600}, figures{"rate": 600e6 / 1024, "mbps": 600})
	put(threeReplicasDiskLimit, figures{"rate": 170e6 / 1024, "mbps": 170, "summbps": 510}, figures{"rate": 160e6 / 1024, "mbps": 160, "summbps": 480})
	put(oneReplicaDiskLimit, figures{"rate": 620e6 / 1024, "mbps": 620}, figures{"rate": 620e6 / 1024, "mbps": 620})
}

func TestOneDiskCeilingRow(t *testing.T) {
	s := &suite{medians: map[string]figures{}, runs: map[string][]figures{}}
	if _, ok := s.oneDiskCeilingRow("w"); ok {
		t.Fatal("a ceiling row without figures")
	}
	clusterMedians(s, "w")
	r, ok := s.oneDiskCeilingRow("w")
	if !ok {
		t.Fatal("no ceiling row")
	}
	if !r.Limit || r.Wharf != 155e6/1024 || r.PeerValue != 165e6/1024 {
		t.Errorf("row %+v: want RF3's median against the three writers' share, as a limit", r)
	}
	for _, want := range []string{"495 MB/s together, 165 MB/s each", "RF3 / ceiling run by run: 0.88×, 1.00×", "RF1 reached 0.97× of one writer (620 MB/s)"} {
		if !strings.Contains(r.Notes, want) {
			t.Errorf("notes lack %q: %s", want, r.Notes)
		}
	}
	if got, want := s.oneDiskRatioCeilingNote("w"), "at most 0.28×: the ceiling of three replicas (each of three writers at once: 165 MB/s) over RF1's 600 MB/s"; !strings.Contains(got, want) {
		t.Errorf("ratio ceiling note %q lacks %q", got, want)
	}
}

func TestCPUPerMB(t *testing.T) {
	f := figures{"mbps": 200, "servercores": 1.5, "clientcores": 0.5}
	cpuPerMB(f)
	if f["serverms"] != 7.5 || f["clientms"] != 2.5 {
		t.Errorf("figures %v: want 7.5 ms servers, 2.5 ms client per MB", f)
	}
	idle := figures{"mbps": 0, "servercores": 1}
	cpuPerMB(idle)
	if _, ok := idle["serverms"]; ok {
		t.Errorf("CPU per MB of nothing: %v", idle)
	}
}

// sampleWindow derives a run's figures from the reads at its window's
// start and end.
func TestSampleWindowReadsAtStartAndEnd(t *testing.T) {
	w := window{start: time.Now().Add(10 * time.Millisecond)}
	w.end = w.start.Add(20 * time.Millisecond)
	var reads []time.Time
	read := func(context.Context) (figures, error) {
		reads = append(reads, time.Now())
		return figures{"n": float64(len(reads))}, nil
	}
	got := <-sampleWindow(context.Background(), w, read, func(start, end figures) figures {
		return figures{"delta": end["n"] - start["n"]}
	})
	if got["delta"] != 1 || len(reads) != 2 || reads[0].Before(w.start) || reads[1].Before(w.end) {
		t.Errorf("figures %v, reads at %v for window %v–%v", got, reads, w.start, w.end)
	}
}

func TestSelectedAlgorithm(t *testing.T) {
	for listing, want := range map[string]string{
		"lzo [lzo-rle] lz4 lz4hc 842 zstd\n": "lzo-rle",
		"lzo lz4":                            "unknown",
	} {
		if got := selectedAlgorithm(listing); got != want {
			t.Errorf("selectedAlgorithm(%q) = %q, want %q", listing, got, want)
		}
	}
}

func TestCPUBoundNote(t *testing.T) {
	rf3 := figures{"serverms": 8, "clientms": 2}
	rf1 := figures{"serverms": 1.5, "clientms": 1, "mbps": 500}
	if got, want := cpuBoundNote(2, rf3, rf1), "carry at most 200 MB/s of RF3, 0.40× RF1's figure, and 800 MB/s of RF1"; !strings.Contains(got, want) {
		t.Errorf("note %q lacks %q", got, want)
	}
	if got := cpuBoundNote(2, figures{}, rf1); got != "" {
		t.Errorf("a note without RF3's CPU: %q", got)
	}
}

func TestOffTheDiskNote(t *testing.T) {
	s := &suite{medians: map[string]figures{}}
	if got := s.offTheDiskNote(); got != "" {
		t.Errorf("a note without figures: %q", got)
	}
	s.medians[clusterDiskWorkload+"|"+rf3Side] = figures{"rate": 100}
	s.medians[clusterDiskWorkload+"|"+rf1Side] = figures{"rate": 300}
	s.medians[clusterRAMWorkload+"|"+rf3Side] = figures{"rate": 110}
	s.medians[clusterRAMWorkload+"|"+rf1Side] = figures{"rate": 390}
	if got, want := s.offTheDiskNote(), "RF3 1.10×, RF1 1.30×"; !strings.Contains(got, want) {
		t.Errorf("note %q lacks %q", got, want)
	}
}
