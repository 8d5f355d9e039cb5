package replica

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/wharf-mq/wharf/internal/raft"
	"github.com/wharf-mq/wharf/internal/record"
	pb "go.etcd.io/raft/v3/raftpb"
)

// TestRaftBatchWaitsForTheEntryBeforeIt: a follower hears of a new term's
// empty entry (which the state file holds) and then of a batch of that
// term (which the log holds), and a power cut follows before any fsync.
// The two files reach the disk independently: the batch may survive
// without the entry before it, and recovery could not place it ("the Raft
// state and the log disagree", the replica fenced for good: seed 482 of
// the simulation, issue 13). So the batch must not be written before the
// entry is durable, whether the two came in one Write or, as there, in
// two (two Readys, in one sync round or in overlapping ones).
func TestRaftBatchWaitsForTheEntryBeforeIt(t *testing.T) {
	newTerm := &pb.HardState{Term: new(uint64(2)), Vote: new(uint64(0)), Commit: new(uint64(1))}
	emptyEntry := &pb.Entry{Index: new(uint64(2)), Term: new(uint64(2)), Type: pb.EntryNormal.Enum()}
	batch := &pb.Entry{Index: new(uint64(3)), Term: new(uint64(2)), Type: pb.EntryNormal.Enum(),
		Data: record.NewBatch(1, []record.Record{{Value: []byte("v")}})}
	for name, writes := range map[string][]*raft.Write{
		"one write":  {{HardState: newTerm, Entries: []*pb.Entry{emptyEntry, batch}}},
		"two writes": {{HardState: newTerm, Entries: []*pb.Entry{emptyEntry}}, {Entries: []*pb.Entry{batch}}},
	} {
		t.Run(name, func(t *testing.T) {
			durable := recordStateSyncs(t)
			dir := filepath.Join(t.TempDir(), "replica")
			l := openRaftUnhosted(t, dir)
			for _, w := range writes {
				hostWrite(t, l.rep, w)
			}
			cut := powerCut(t, dir, durable)
			l.Close()

			l = openRaftUnhosted(t, cut)
			defer l.Close()
			r := l.rep
			if r.lastIndex() < 2 || r.slotAt(2).meta == nil || r.lastIndex() > 3 {
				t.Fatalf("after the power cut: entries up to %d, entry 2 %+v; want the empty entry 2, and batch 3 or not",
					r.lastIndex(), r.slotAt(min(2, r.lastIndex())))
			}
		})
	}
}

// hostWrite writes w as the host does: when the replica writes only part
// of the entries, the sync round that follows makes what it wrote durable
// before the rest is written.
func hostWrite(t *testing.T, r *raftReplica, w *raft.Write) {
	t.Helper()
	for {
		n, err := r.Write(w)
		if err != nil {
			t.Fatal(err)
		}
		w = &raft.Write{Entries: w.Entries[n:]}
		if len(w.Entries) == 0 {
			return
		}
		if err := r.Sync(); err != nil {
			t.Fatal(err)
		}
	}
}

// openRaftUnhosted opens a one-member Raft log in dir on a host whose loop
// does not run: the test calls the replica as the host would.
func openRaftUnhosted(t *testing.T, dir string) *RaftLog {
	t.Helper()
	h, err := raft.NewHost(raft.Config{NodeID: 1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	l, err := OpenRaft(dir, DefaultConfig(), RaftOptions{Host: h, Group: 1, Members: []uint64{1},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("opening %s: %v", dir, err)
	}
	return l
}

// recordStateSyncs records how much of each state file the fsyncs made
// durable.
func recordStateSyncs(t *testing.T) func(path string) int64 {
	var mu sync.Mutex
	durable := map[string]int64{}
	t.Cleanup(SetStateSyncHook(func(path string, size int64) {
		mu.Lock()
		durable[path] = size
		mu.Unlock()
	}))
	return func(path string) int64 {
		mu.Lock()
		defer mu.Unlock()
		return durable[path]
	}
}

// powerCut copies the replica in dir as a power cut could leave it: its
// state file cut back to what was fsynced, its log whole (written back
// from the page cache before the cut, fsynced or not). It returns the
// copy's directory.
func powerCut(t *testing.T, dir string, durable func(path string) int64) string {
	t.Helper()
	to := dir + "-after-power-cut"
	err := filepath.Walk(dir, func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if fi.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		size := fi.Size()
		if fi.Name() == raftStateFile {
			size = durable(path)
		}
		return copyPrefix(path, filepath.Join(to, rel), size)
	})
	if err != nil {
		t.Fatal(err)
	}
	return to
}

func copyPrefix(from, to string, size int64) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.CopyN(dst, src, size); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
