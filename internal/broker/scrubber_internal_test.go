package broker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// metadataTimestampByte is a byte of the first metadata batch's base
// timestamp: covered by the CRC, but its records still parse when it is
// flipped, so only a CRC check notices.
const metadataTimestampByte = 34

func flipFileByte(t *testing.T, path string, pos int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, pos); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{b[0] ^ 0x01}, pos); err != nil {
		t.Fatal(err)
	}
}

func metadataSegment(dir string) string {
	return filepath.Join(dir, metadataLogName, fmt.Sprintf("%020d.log", 0))
}

// TestMetadataLogDamageRefusesStart: a flipped byte in the metadata log
// (after a clean close, where seglog's recovery trusts the files) is
// found by its replay, which checks every batch's CRC, and the broker
// refuses to start.
func TestMetadataLogDamageRefusesStart(t *testing.T) {
	dir := brokerWithTopic(t, "orders", 1)
	flipFileByte(t, metadataSegment(dir), metadataTimestampByte)
	b, err := Open(Config{DataDir: dir})
	if err == nil {
		b.Close()
		t.Fatal("a broker started on a damaged metadata log")
	}
	t.Logf("refused: %v", err)
}

// TestPeriodicScrubFindsMetadataDamage: damage done to the metadata log
// while the broker runs is found by the periodic scrub, after which
// topic changes are refused rather than appended after the damage.
func TestPeriodicScrubFindsMetadataDamage(t *testing.T) {
	dir := t.TempDir()
	b := openTestBroker(t, dir, func(c *Config) { c.ScrubInterval = 20 * time.Millisecond })
	defer b.Close()
	if _, err := b.CreateTopic(TopicSpec{Name: "before"}, false); err != nil {
		t.Fatal(err)
	}
	flipFileByte(t, metadataSegment(dir), metadataTimestampByte)
	deadline := time.Now().Add(10 * time.Second)
	for b.meta.log.Corruption() == nil {
		if time.Now().After(deadline) {
			t.Fatal("the periodic scrub did not find the damaged metadata log")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := b.CreateTopic(TopicSpec{Name: "after"}, false); !errors.Is(err, ErrStorage) {
		t.Errorf("CreateTopic on a damaged metadata log: %v, want a storage error", err)
	}
}

// TestScrubberCoversInternalTopics: __consumer_offsets is scrubbed like
// any topic: a flipped byte there takes that partition offline.
func TestScrubberCoversInternalTopics(t *testing.T) {
	dir := t.TempDir()
	b := openTestBroker(t, dir)
	offsets, err := b.CreateInternalTopic(TopicSpec{Name: "__consumer_offsets", Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	produceValues(t, offsets, "a", "b", "c")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	flipFileByte(t, filepath.Join(dir, "__consumer_offsets-0", fmt.Sprintf("%020d.log", 0)), 70)

	b = openTestBroker(t, dir)
	defer b.Close()
	offsets, _ = b.Topic("__consumer_offsets")
	p0, p1 := offsets.Partitions()[0], offsets.Partitions()[1]
	deadline := time.Now().Add(10 * time.Second)
	for p0.Offline() == nil {
		if time.Now().After(deadline) {
			t.Fatal("the scrubber did not take the damaged __consumer_offsets-0 offline")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if p1.Offline() != nil {
		t.Errorf("__consumer_offsets-1 went offline too: %v", p1.Offline())
	}
}
