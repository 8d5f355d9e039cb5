package broker

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/wharf-mq/wharf/internal/record"
)

// recordValues reads p from offset from with ReadRecords and returns the
// values it was handed, with the offset of each.
func recordValues(t *testing.T, p *Partition, from int64) (values []string, offsets []int64) {
	t.Helper()
	err := p.ReadRecords(from, func(h record.Header, recs []record.Record) error {
		if len(recs) == 0 {
			t.Errorf("batch at %d handed over with no records", h.BaseOffset)
		}
		for _, r := range recs {
			values = append(values, string(r.Value))
			offsets = append(offsets, h.BaseOffset+int64(r.OffsetDelta))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("ReadRecords(%d): %v", from, err)
	}
	return values, offsets
}

func TestReadRecords(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	defer b.Close()
	topic, err := b.CreateTopic(TopicSpec{Name: "replay", Partitions: 1}, false)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := topic.Partition(0)
	// Batches larger than one replay read, so that it takes several.
	big := strings.Repeat("x", replayReadBytes/2)
	for _, batch := range [][]byte{batchOf("a", "b"), batchOf("c", "d", "e"), batchOf(big), batchOf(big), batchOf(big, "f")} {
		if _, _, err := p.Produce(batch, -1); err != nil {
			t.Fatal(err)
		}
	}
	all := []string{"a", "b", "c", "d", "e", big, big, big, "f"}

	values, offsets := recordValues(t, p, 0)
	if !slices.Equal(values, all) {
		t.Fatalf("from 0: %d values, want %d", len(values), len(all))
	}
	if want := []int64{0, 1, 2, 3, 4, 5, 6, 7, 8}; !slices.Equal(offsets, want) {
		t.Fatalf("from 0: offsets %v, want %v", offsets, want)
	}

	// From the middle of a batch: the records before it are not handed over.
	values, offsets = recordValues(t, p, 3)
	if !slices.Equal(values, all[3:]) || offsets[0] != 3 {
		t.Fatalf("from 3: values start %q at %d, want %q at 3", values[0], offsets[0], all[3])
	}

	// At the end there is nothing to read.
	if values, _ = recordValues(t, p, p.EndOffset()); len(values) != 0 {
		t.Fatalf("from the end: %d values", len(values))
	}

	// fn's error ends the read and comes back unchanged.
	stop := errors.New("stop")
	calls := 0
	err = p.ReadRecords(0, func(record.Header, []record.Record) error {
		calls++
		return stop
	})
	if err != stop || calls != 1 {
		t.Fatalf("ReadRecords with failing fn: err %v after %d calls, want %v after 1", err, calls, stop)
	}

	// Below the log start is out of range.
	if err := p.ReadRecords(-5, func(record.Header, []record.Record) error { return nil }); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("ReadRecords(-5): %v, want ErrOffsetOutOfRange", err)
	}
}
