package seglog

import (
	"testing"

	"github.com/wharf-mq/wharf/internal/record"
)

// AppendAtVerified writes batches lying in separate parts, more of them
// than one pwritev takes, in order as one append: they read back, and
// after a crash every one of them verifies.
func TestAppendAtVerifiedParts(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, DefaultConfig())
	var parts [][]byte
	var next int64
	for i := range 2*1024 + 10 {
		n := 1 + i%3
		b := makeBatch(next, n, next)
		record.SetBaseOffset(b, next)
		parts = append(parts, b)
		next += int64(n)
	}
	res, err := l.AppendAtVerified(1, parts...)
	if err != nil {
		t.Fatal(err)
	}
	if res.BaseOffset != 0 || res.LastOffset != next-1 || l.EndOffset() != next {
		t.Fatalf("appended [%d, %d], log ends at %d; want [0, %d]", res.BaseOffset, res.LastOffset, l.EndOffset(), next-1)
	}
	if got := readAll(t, l, 1<<20); len(got) != int(next) {
		t.Fatalf("read %d records, want %d", len(got), next)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	l.crash()
	l = mustOpen(t, dir, DefaultConfig()) // verifies every batch after the recovery point
	defer l.Close()
	if l.EndOffset() != next {
		t.Fatalf("reopened, the log ends at %d, want %d", l.EndOffset(), next)
	}
	if got := readAll(t, l, 1<<20); len(got) != int(next) {
		t.Fatalf("reopened, read %d records, want %d", len(got), next)
	}
}
