package broker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/record"
	"github.com/wharf-mq/wharf/internal/seglog"
)

// flippedAfterCleanClose writes three batches to each of two partitions,
// closes the broker cleanly and flips a byte inside the records of the
// first batch of partition 0, where the next start's recovery does not look.
func flippedAfterCleanClose(t *testing.T) (dir, seg string) {
	t.Helper()
	dir = t.TempDir()
	b := openTestBroker(t, dir)
	tp, _ := b.CreateTopic(TopicSpec{Name: "rot", Partitions: 2}, false)
	for _, p := range tp.Partitions() {
		for range 3 {
			if _, _, err := p.Produce(batchOf("some value"), -1); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	seg = filepath.Join(dir, "rot-0", fmt.Sprintf("%020d.log", 0))
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	data[record.HeaderSize+5] ^= 0x40
	if err := os.WriteFile(seg, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, seg
}

func TestScrubberTakesCorruptPartitionOffline(t *testing.T) {
	dir, seg := flippedAfterCleanClose(t)
	b := openTestBroker(t, dir)
	defer b.Close()
	tp, err := b.Topic("rot")
	if err != nil {
		t.Fatal(err)
	}
	p0, _ := tp.Partition(0)
	p1, _ := tp.Partition(1)
	var corrupt *seglog.CorruptionError
	deadline := time.Now().Add(10 * time.Second)
	for !errors.As(p0.Offline(), &corrupt) {
		if time.Now().After(deadline) {
			t.Fatalf("partition 0 still online 10s after start: Offline() = %v", p0.Offline())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if corrupt.File != seg || corrupt.Pos != 0 {
		t.Errorf("corruption reported at %s:%d, want %s:0", corrupt.File, corrupt.Pos, seg)
	}
	if _, _, err := p0.Produce(batchOf("x"), -1); !errors.Is(err, ErrStorage) {
		t.Errorf("produce to the scrubbed-offline partition: %v", err)
	}
	if _, err := p0.Read(0, 100); !errors.Is(err, ErrStorage) {
		t.Errorf("read from the scrubbed-offline partition: %v", err)
	}
	if _, _, _, err := p0.OffsetForTime(0); !errors.Is(err, ErrStorage) {
		t.Errorf("offset lookup on the scrubbed-offline partition: %v", err)
	}
	if p1.Offline() != nil || len(readValues(t, p1)) != 3 {
		t.Errorf("the healthy partition was affected: %v", p1.Offline())
	}
	// Close still closes the damaged log cleanly (the damage is not lost
	// data of this run), and the next start finds it again.
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func TestScrubberCanBeTurnedOff(t *testing.T) {
	dir, _ := flippedAfterCleanClose(t)
	b := openTestBroker(t, dir, func(c *Config) { c.ScrubInterval = -1 })
	defer b.Close()
	tp, _ := b.Topic("rot")
	p0, _ := tp.Partition(0)
	// Nothing runs that could take it offline: Open's trust is all there is.
	b.Close() // waits for every background goroutine
	if p0.Offline() != nil {
		t.Errorf("partition taken offline with the scrubber off: %v", p0.Offline())
	}
}

func TestPeriodicScrubFindsDamageDoneWhileRunning(t *testing.T) {
	b := openTestBroker(t, t.TempDir(), func(c *Config) { c.ScrubInterval = 20 * time.Millisecond })
	defer b.Close()
	tp, _ := b.CreateTopic(TopicSpec{Name: "rot"}, false)
	p, _ := tp.Partition(0)
	for range 3 {
		if _, _, err := p.Produce(batchOf("some value"), -1); err != nil {
			t.Fatal(err)
		}
	}
	// Verified at produce time; now rot the last batch on disk.
	f, err := os.OpenFile(filepath.Join(p.dir, fmt.Sprintf("%020d.log", 0)), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The active segment's file runs past its data (seglog preallocates
	// it): the last batch ends at the log's size, not the file's.
	if _, err := f.WriteAt([]byte{0xff}, p.Size()-2); err != nil {
		t.Fatal(err)
	}
	f.Close()
	deadline := time.Now().Add(10 * time.Second)
	for p.Offline() == nil {
		if time.Now().After(deadline) {
			t.Fatal("the periodic scrub did not take the partition offline")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, _, err := p.Produce(batchOf("x"), -1); !errors.Is(err, ErrStorage) {
		t.Errorf("produce after the periodic scrub found damage: %v", err)
	}
}
