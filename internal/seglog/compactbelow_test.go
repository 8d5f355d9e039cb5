package seglog

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"
)

// TestCompactBelowLeavesSegmentsFromLimit: a pass with a limit rewrites
// only the closed segments wholly below it, byte for byte leaving the
// ones that reach it (what a Raft replica still indexes), and the next
// pass without a limit compacts those too.
func TestCompactBelowLeavesSegmentsFromLimit(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, compactConfig())
	m := newKeyedLog(t, l)
	fillKeyed(m, testTs0)
	m.append(afterWorkload, put(key(21), "final"))
	bases := segmentBases(l)
	if len(bases) < 5 {
		t.Fatalf("only %d segments", len(bases))
	}
	limit := bases[len(bases)/2] + 1 // inside the middle segment: it stays too
	kept := map[int64][]byte{}
	for _, b := range bases[len(bases)/2:] {
		kept[b], _ = os.ReadFile(segmentPath(dir, b, logSuffix))
	}

	st, err := l.CompactBelow(context.Background(), time.UnixMilli(withinRetained), limit)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Cleaned || st.RecordsRemoved == 0 || st.CleanedThrough > limit {
		t.Fatalf("a pass below %d: %+v", limit, st)
	}
	for b, before := range kept {
		if after, _ := os.ReadFile(segmentPath(dir, b, logSuffix)); !bytes.Equal(before, after) {
			t.Fatalf("the segment at %d, not wholly below %d, was rewritten", b, limit)
		}
	}
	sameState(t, replay(m.readKeyed(everything)), m.live())

	if st := mustCompact(t, l, withinRetained); st.CleanedThrough != activeBase(l) {
		t.Fatalf("a pass without a limit: %+v", st)
	}
	checkCompacted(t, m, m.readKeyed(everything))
}
