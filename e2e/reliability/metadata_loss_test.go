package reliability

import (
	"context"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/wharf-mq/wharf/internal/node"
	"github.com/wharf-mq/wharf/internal/nodetest"
)

// Metadata loss: the metadata log defines every topic and queue; losing it,
// or its newest records, must never cost the data it describes. Each case
// starts from a copy of one data directory holding 9,000 acknowledged
// records (3 partitions of "orders") and a group's committed offsets.

const (
	lossTopic = "orders"
	lossGroup = "billing"
	metaDir   = "__cluster_metadata-0"
)

// lossFixture is the data directory the cases copy, and what it holds.
type lossFixture struct {
	dir   string
	acked []kafkaAck
}

func newLossFixture(t *testing.T) lossFixture {
	t.Helper()
	dir := filepath.Join(workDir(t), "template")
	n := nodetest.Start(t, nodetest.WithDataDir(dir), newNodeLog(t, slog.LevelWarn).option())
	createTopic(t, n.KafkaAddr(), lossTopic, 3, nil)
	acked := produceEach(t, n.KafkaAddr(), lossTopic, 3)
	var offsets kadm.Offsets
	for p := range int32(3) {
		offsets.Add(kadm.Offset{Topic: lossTopic, Partition: p, At: 1500, LeaderEpoch: -1})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := kadm.NewClient(newKafkaClient(t, n.KafkaAddr())).CommitAllOffsets(ctx, lossGroup, offsets); err != nil {
		t.Fatalf("commit offsets: %v", err)
	}
	closeNode(t, n)
	return lossFixture{dir: dir, acked: acked}
}

// copyTo copies the fixture's data directory to a new one.
func (f lossFixture) copyTo(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(workDir(t), name)
	if err := os.CopyFS(dir, os.DirFS(f.dir)); err != nil {
		t.Fatal(err)
	}
	return dir
}

// restoreMetadata puts the fixture's metadata log back in dir.
func (f lossFixture) restoreMetadata(t *testing.T, dir string) {
	t.Helper()
	if err := os.RemoveAll(filepath.Join(dir, metaDir)); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(dir, metaDir), os.DirFS(filepath.Join(f.dir, metaDir))); err != nil {
		t.Fatal(err)
	}
}

// requireEverything starts a node on dir and requires every acknowledged
// record at its offset and the group's offsets; it returns the tally.
func (f lossFixture) requireEverything(t *testing.T, dir, stage string) tally {
	t.Helper()
	n := nodetest.Start(t, nodetest.WithDataDir(dir), newNodeLog(t, slog.LevelWarn).option())
	defer closeNode(t, n)
	logs := readTopic(t, n.KafkaAddr(), lossTopic)
	var c tally
	for _, a := range f.acked {
		c.checked++
		if logs[a.partition][a.offset] != a.value {
			c.lost++
		}
	}
	if !c.ok() {
		t.Errorf("%s: %s", stage, c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fetched, err := kadm.NewClient(newKafkaClient(t, n.KafkaAddr())).FetchOffsets(ctx, lossGroup)
	if err != nil {
		t.Fatalf("%s: fetch offsets: %v", stage, err)
	}
	for p := range int32(3) {
		if o, ok := fetched.Lookup(lossTopic, p); !ok || o.At != 1500 {
			t.Errorf("%s: %s's offset for %s-%d is %d (found %v), want 1500", stage, lossGroup, lossTopic, p, o.At, ok)
		}
	}
	return c
}

// dataFiles maps every file under dir, but the metadata log and the lock
// file, to its size: what a refused start must leave as it was.
func dataFiles(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	files := map[string]int64{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		switch {
		case rel == metaDir:
			return filepath.SkipDir
		case d.IsDir() || rel == ".lock":
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		files[rel] = info.Size()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func sameFiles(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func metaSegment(dir string) string {
	return filepath.Join(dir, metaDir, "00000000000000000000.log")
}

// TestMetadataLossRefusesStart: the metadata log removed, emptied, or cut
// short at a batch boundary (its recovery point intact). The broker must
// refuse to start, say why, and touch no data; with the metadata log put
// back, every acknowledged record and the group's offsets are there.
func TestMetadataLossRefusesStart(t *testing.T) {
	fx := newLossFixture(t)
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, dir string)
	}{
		{"removed", func(t *testing.T, dir string) {
			if err := os.RemoveAll(filepath.Join(dir, metaDir)); err != nil {
				t.Fatal(err)
			}
		}},
		{"emptied", func(t *testing.T, dir string) {
			entries, _ := os.ReadDir(filepath.Join(dir, metaDir))
			for _, e := range entries {
				os.Remove(filepath.Join(dir, metaDir, e.Name()))
			}
		}},
		{"segment truncated to 0 bytes", func(t *testing.T, dir string) { truncateFile(t, metaSegment(dir), 0) }},
		{"cut short after its first batch", func(t *testing.T, dir string) {
			truncateFile(t, metaSegment(dir), batchPositions(t, metaSegment(dir))[1])
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := fx.copyTo(t, "data")
			before := dataFiles(t, dir)
			c.damage(t, dir)
			n, err := node.Start(node.Config{DataDir: dir, KafkaAddr: "127.0.0.1:0"})
			if err == nil {
				closeNode(t, n)
				t.Fatal("the node started on data whose metadata log was lost")
			}
			t.Logf("refused: %v", err)
			if !strings.Contains(err.Error(), "metadata log") {
				t.Errorf("the refusal does not name the metadata log: %v", err)
			}
			if !sameFiles(before, dataFiles(t, dir)) {
				t.Errorf("the refused start changed the data: %d files before, %d after", len(before), len(dataFiles(t, dir)))
			}
			fx.restoreMetadata(t, dir)
			t.Logf("metadata log put back: kafka %s", fx.requireEverything(t, dir, "after putting the metadata log back"))
		})
	}
}

// strayName is a directory moved aside: <dir>.<random>-stray.
var strayName = regexp.MustCompile(`^(.+)\.[0-9a-f]+-stray$`)

// TestMetadataLossWithStaleCheckpointKeepsData: the metadata log cut short
// together with its recovery point (as a copy restored from an older
// backup is), so nothing shows it is short. The broker starts without the
// topics it lost, and must move their directories aside, never delete
// them: with the newest metadata log and the directories put back,
// everything is there.
func TestMetadataLossWithStaleCheckpointKeepsData(t *testing.T) {
	fx := newLossFixture(t)
	dir := fx.copyTo(t, "data")
	truncateFile(t, metaSegment(dir), batchPositions(t, metaSegment(dir))[1])
	if err := os.Remove(filepath.Join(dir, metaDir, "recovery-point")); err != nil {
		t.Fatal(err)
	}
	logs := newNodeLog(t, slog.LevelError)
	n := nodetest.Start(t, nodetest.WithDataDir(dir), logs.option())
	if _, err := n.Broker().Topic(lossTopic); err == nil {
		t.Fatalf("%s exists although the metadata log lost it", lossTopic)
	}
	closeNode(t, n)

	strays, err := filepath.Glob(filepath.Join(dir, "*-stray"))
	if err != nil {
		t.Fatal(err)
	}
	movedTopic := 0
	for _, s := range strays {
		if strings.HasPrefix(filepath.Base(s), lossTopic+"-") {
			movedTopic++
		}
	}
	t.Logf("moved aside: %d directories (%d of %s); %d error lines", len(strays), movedTopic, lossTopic, len(logs.find("level=ERROR", "moved aside")))
	if movedTopic != 3 || len(logs.find("level=ERROR", "moved aside")) != len(strays) {
		t.Errorf("want %s's 3 partition directories moved aside, each with an error line", lossTopic)
	}

	fx.restoreMetadata(t, dir)
	for _, s := range strays {
		orig := filepath.Join(dir, strayName.FindStringSubmatch(filepath.Base(s))[1])
		if err := os.RemoveAll(orig); err != nil { // made anew by the start without metadata
			t.Fatal(err)
		}
		if err := os.Rename(s, orig); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("metadata log and directories put back: kafka %s", fx.requireEverything(t, dir, "after putting everything back"))
}
