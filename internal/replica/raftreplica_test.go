package replica

import "testing"

// TestAdjoin: batches join without a copy only where the second lies
// right after the first in the same buffer.
func TestAdjoin(t *testing.T) {
	buf := make([]byte, 30)
	a, b, c := buf[0:10], buf[10:20], buf[20:30]
	run, ok := adjoin(a, b)
	if !ok || len(run) != 20 || &run[0] != &buf[0] {
		t.Fatalf("back-to-back batches did not join: %d bytes, %v", len(run), ok)
	}
	if run, ok = adjoin(run, c); !ok || len(run) != 30 {
		t.Fatalf("a third batch did not join: %d bytes, %v", len(run), ok)
	}
	for name, pair := range map[string][2][]byte{
		"capped":       {buf[0:10:10], b},
		"gap":          {a, c},
		"out of order": {b, a},
		"other buffer": {a, make([]byte, 10)},
	} {
		if run, ok := adjoin(pair[0], pair[1]); ok || len(run) != len(pair[0]) {
			t.Errorf("%s: joined into %d bytes", name, len(run))
		}
	}
}
