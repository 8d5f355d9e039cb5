package seglog

import (
	"errors"
	"os"
	"testing"
)

// TestCleanLogCutShortIsCorrupt: a cleanly closed log whose last segment
// lost its tail afterwards (a truncated copy, a file system that lost
// blocks) ends below the recovery point Close wrote. Open must refuse it
// as it refuses the same after a crash, rather than trust the marker and
// serve a log with fsynced records missing.
func TestCleanLogCutShortIsCorrupt(t *testing.T) {
	for _, c := range []struct {
		name string
		cut  func(t *testing.T, seg string)
	}{
		{"tail truncated", func(t *testing.T, seg string) {
			if err := os.Truncate(seg, batchPositions(t, seg)[3]); err != nil {
				t.Fatal(err)
			}
		}},
		{"segment removed", func(t *testing.T, seg string) {
			if err := os.Remove(seg); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			l := mustOpen(t, dir, DefaultConfig())
			end := appendBatches(t, l, 6, 2, 1000)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			c.cut(t, segmentFiles(t, dir)[0])
			l, err := Open(dir, DefaultConfig(), testLogger(t))
			var ce *CorruptionError
			if !errors.As(err, &ce) {
				if l != nil {
					t.Logf("reopened log ends at %d, was %d", l.EndOffset(), end)
					l.Close()
				}
				t.Fatalf("Open of a cut-short log: %v, want a *CorruptionError", err)
			}
		})
	}
}
