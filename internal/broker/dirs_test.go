package broker

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// produceValues writes one batch per value to every partition of t.
func produceValues(t *testing.T, tp *Topic, values ...string) {
	t.Helper()
	for _, p := range tp.Partitions() {
		for _, v := range values {
			if _, _, err := p.Produce(batchOf(v), -1); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// brokerWithTopic opens a broker on a new directory, creates topic with
// partitions partitions holding "a", "b", "c" each, and closes it.
func brokerWithTopic(t *testing.T, topic string, partitions int32) string {
	t.Helper()
	dir := t.TempDir()
	b := openTestBroker(t, dir)
	tp, err := b.CreateTopic(TopicSpec{Name: topic, Partitions: partitions}, false)
	if err != nil {
		t.Fatal(err)
	}
	produceValues(t, tp, "a", "b", "c")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// capturedLog is a broker logger that keeps its lines for a test to read.
type capturedLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (c *capturedLog) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Write(p)
}

func (c *capturedLog) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

func (c *capturedLog) config(cfg *Config) { cfg.Logger = slog.New(slog.NewTextHandler(c, nil)) }

func strays(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+straySuffix))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestMissingMetadataLogRefusesStart: with partition data in the data
// directory and no metadata log, Open refuses and deletes nothing; with
// the metadata log put back, everything is there.
func TestMissingMetadataLogRefusesStart(t *testing.T) {
	dir := brokerWithTopic(t, "orders", 2)
	meta, aside := filepath.Join(dir, metadataLogName), filepath.Join(t.TempDir(), "meta")
	if err := os.Rename(meta, aside); err != nil {
		t.Fatal(err)
	}
	b, err := Open(Config{DataDir: dir})
	if err == nil {
		b.Close()
		t.Fatal("a broker started on partition data without its metadata log")
	}
	if !strings.Contains(err.Error(), "metadata log") || !strings.Contains(err.Error(), "2 partitions") {
		t.Errorf("refusal does not say what is wrong: %v", err)
	}
	os.RemoveAll(meta) // what the refused start left: an empty log
	if err := os.Rename(aside, meta); err != nil {
		t.Fatal(err)
	}
	b = openTestBroker(t, dir)
	defer b.Close()
	tp, err := b.Topic("orders")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range tp.Partitions() {
		if got := readValues(t, p); len(got) != 3 {
			t.Errorf("partition %d after the metadata log came back: %v", p.Index(), got)
		}
	}
}

// TestUnknownPartitionDirIsMovedAside: a partition directory of a topic
// the metadata log does not know (here: copied from another broker's data
// directory, as a metadata log restored from an older copy would leave
// it) is moved aside with its data, not deleted, and logged.
func TestUnknownPartitionDirIsMovedAside(t *testing.T) {
	from := brokerWithTopic(t, "orders", 1)
	dir := brokerWithTopic(t, "other", 1)
	if err := os.Rename(filepath.Join(from, "orders-0"), filepath.Join(dir, "orders-0")); err != nil {
		t.Fatal(err)
	}
	var logs capturedLog
	b := openTestBroker(t, dir, logs.config)
	b.Close()
	moved := strays(t, dir)
	if len(moved) != 1 || !strings.HasPrefix(filepath.Base(moved[0]), "orders-0.") {
		t.Fatalf("moved aside: %v, want orders-0.<random>%s", moved, straySuffix)
	}
	if _, err := os.Stat(filepath.Join(moved[0], fmt.Sprintf("%020d.log", 0))); err != nil {
		t.Errorf("the moved directory lost its segment: %v", err)
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "orders-0") {
		t.Errorf("moving orders-0 aside was not logged as an error:\n%s", logs.String())
	}
	// The next start leaves the stray directory alone.
	b = openTestBroker(t, dir)
	b.Close()
	if again := strays(t, dir); len(again) != 1 || again[0] != moved[0] {
		t.Errorf("stray directories after another start: %v, want %v", again, moved)
	}
}

// TestDeletedTopicLeftoversAreRemoved: the directory of a topic whose
// deletion the metadata log records (a crash between the record and the
// removal) is removed at the next start, and a new topic of the same name
// starts empty.
func TestDeletedTopicLeftoversAreRemoved(t *testing.T) {
	dir := brokerWithTopic(t, "orders", 1)
	kept := filepath.Join(t.TempDir(), "orders-0")
	if err := os.CopyFS(kept, os.DirFS(filepath.Join(dir, "orders-0"))); err != nil {
		t.Fatal(err)
	}
	b := openTestBroker(t, dir)
	if err := b.DeleteTopic("orders"); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if err := os.Rename(kept, filepath.Join(dir, "orders-0")); err != nil {
		t.Fatal(err)
	}
	b = openTestBroker(t, dir)
	defer b.Close()
	if _, err := os.Stat(filepath.Join(dir, "orders-0")); !os.IsNotExist(err) {
		t.Errorf("the deleted topic's directory is still there: %v", err)
	}
	if s := strays(t, dir); len(s) != 0 {
		t.Errorf("a deleted topic's directory was moved aside, not removed: %v", s)
	}
}

// TestUnopenablePartitionGoesOffline: a partition whose files cannot be
// opened, or whose directory is gone, is kept offline with the reason, as
// a corrupt one is; the broker starts and the other partitions serve.
func TestUnopenablePartitionGoesOffline(t *testing.T) {
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, partDir string)
		want   string
	}{
		{"segment is not a file", func(t *testing.T, partDir string) {
			seg := filepath.Join(partDir, fmt.Sprintf("%020d.log", 0))
			if err := os.Remove(seg); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(seg, 0o755); err != nil {
				t.Fatal(err)
			}
		}, "is a directory"},
		{"partition.metadata unreadable", func(t *testing.T, partDir string) {
			path := filepath.Join(partDir, partitionMetadataFile)
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(path, 0o755); err != nil {
				t.Fatal(err)
			}
		}, "is a directory"},
		{"directory missing", func(t *testing.T, partDir string) {
			if err := os.RemoveAll(partDir); err != nil {
				t.Fatal(err)
			}
		}, "missing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := brokerWithTopic(t, "orders", 2)
			c.damage(t, filepath.Join(dir, "orders-0"))
			b := openTestBroker(t, dir)
			defer b.Close()
			tp, err := b.Topic("orders")
			if err != nil {
				t.Fatal(err)
			}
			p0, _ := tp.Partition(0)
			if err := p0.Offline(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("damaged partition: offline = %v, want an error with %q", err, c.want)
			}
			if _, _, err := p0.Produce(batchOf("x"), -1); err == nil {
				t.Error("produce to the damaged partition succeeded")
			}
			p1, _ := tp.Partition(1)
			if p1.Offline() != nil || len(readValues(t, p1)) != 3 {
				t.Errorf("the healthy partition was affected: %v", p1.Offline())
			}
			if _, _, err := p1.Produce(batchOf("d"), -1); err != nil {
				t.Errorf("produce to the healthy partition: %v", err)
			}
		})
	}
}

// TestOfflinePartitionTopicCanBeDeleted: deleting a topic with an offline
// partition removes its directories, and a new topic of that name works.
func TestOfflinePartitionTopicCanBeDeleted(t *testing.T) {
	dir := brokerWithTopic(t, "orders", 1)
	seg := filepath.Join(dir, "orders-0", fmt.Sprintf("%020d.log", 0))
	os.Remove(seg)
	os.Mkdir(seg, 0o755)
	b := openTestBroker(t, dir)
	defer b.Close()
	if err := b.DeleteTopic("orders"); err != nil {
		t.Fatal(err)
	}
	tp, err := b.CreateTopic(TopicSpec{Name: "orders", Partitions: 1}, false)
	if err != nil {
		t.Fatal(err)
	}
	produceValues(t, tp, "new")
	if got := readValues(t, tp.Partitions()[0]); len(got) != 1 || got[0] != "new" {
		t.Errorf("recreated topic holds %v", got)
	}
}

// TestNewPartitionDirsAreSyncedBeforeRecording: the data directory's
// entries for a new topic's (and new partitions') directories are fsynced
// before the metadata log records them, so a crash cannot leave the
// metadata naming directories that vanished with it.
func TestNewPartitionDirsAreSyncedBeforeRecording(t *testing.T) {
	dir := t.TempDir()
	b := openTestBroker(t, dir)
	defer b.Close()
	var dataDirSyncs []int64 // the metadata log's end at each fsync of dir
	real := syncDir
	syncDir = func(d string) error {
		if d == dir {
			dataDirSyncs = append(dataDirSyncs, b.meta.log.EndOffset())
		}
		return real(d)
	}
	defer func() { syncDir = real }()

	before := b.meta.log.EndOffset()
	if _, err := b.CreateTopic(TopicSpec{Name: "orders", Partitions: 3}, false); err != nil {
		t.Fatal(err)
	}
	if len(dataDirSyncs) != 1 || dataDirSyncs[0] != before {
		t.Errorf("CreateTopic: data directory fsynced with the metadata log at %v, want once at %d (before the record)", dataDirSyncs, before)
	}
	dataDirSyncs, before = nil, b.meta.log.EndOffset()
	if err := b.CreatePartitions("orders", 5, false); err != nil {
		t.Fatal(err)
	}
	if len(dataDirSyncs) != 1 || dataDirSyncs[0] != before {
		t.Errorf("CreatePartitions: data directory fsynced with the metadata log at %v, want once at %d (before the record)", dataDirSyncs, before)
	}
}

// TestDisposeOfBesideApplyLoop: disposeOf, which a reassignment's
// goroutine reaches as it opens a replica, reads the deleted topics while
// a cluster's apply loop records deletions (go test -race).
func TestDisposeOfBesideApplyLoop(t *testing.T) {
	c := newTestCluster(t, 1)
	b := c.broker(1)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		dir := filepath.Join(t.TempDir(), "left")
		for {
			select {
			case <-done:
				return
			default:
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Error(err)
				return
			}
			if err := b.disposeOf(dir, [16]byte{1}, true); err != nil { // moved aside
				t.Error(err)
				return
			}
		}
	})
	for i := range 5 {
		name := fmt.Sprintf("t%d", i)
		if _, err := b.CreateTopic(TopicSpec{Name: name, ReplicationFactor: 1}, false); err != nil {
			t.Fatal(err)
		}
		if err := b.DeleteTopic(name); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
}

// TestClusterStrayReplicaDirMessage: a cluster node that finds, at start,
// the replica directory of a topic the cluster's metadata does not know
// (a topic deleted while it was down, whose deletion's record the others
// compacted away) moves it aside and says so as a warning, not as a lost
// metadata log to restore.
func TestClusterStrayReplicaDirMessage(t *testing.T) {
	c := newTestCluster(t, 1)
	if _, err := c.broker(1).CreateTopic(TopicSpec{Name: "kept", ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	c.stop(1)
	dir := filepath.Join(c.base, "node1", "ghost-0")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeFileSync(filepath.Join(dir, partitionMetadataFile), partitionMetadata([16]byte{7})); err != nil {
		t.Fatal(err)
	}
	if _, err := c.restart(1); err != nil {
		t.Fatal(err)
	}
	if moved := strays(t, filepath.Join(c.base, "node1")); len(moved) != 1 || !strings.HasPrefix(filepath.Base(moved[0]), "ghost-0.") {
		t.Fatalf("moved aside: %v, want ghost-0.<random>%s", moved, straySuffix)
	}
	var line string
	for l := range strings.Lines(c.nodes[1].log.String()) {
		if strings.Contains(l, "ghost-0") {
			line = l
		}
	}
	if !strings.Contains(line, "level=WARN") || !strings.Contains(line, "deleted while this node was down") ||
		strings.Contains(line, "copy back") {
		t.Errorf("moving ghost-0 aside logged %q, want a warning that the topic was deleted while the node was down", line)
	}
}
