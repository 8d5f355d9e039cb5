package replica

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/wharf-mq/wharf/internal/raft"
	"github.com/wharf-mq/wharf/internal/record"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// TestRaftBatchWaitsForTheEntryBeforeIt: a replica is handed an entry
// without records (which the state file holds) and then a batch (which
// the log holds), and a power cut follows before any fsync. The two files
// reach the disk independently: the batch may survive without the entry
// before it. Recovery cannot place such a batch: of a new term, without
// that term's empty entry, it refuses the replica for good ("the Raft
// state and the log disagree": seed 482 of the simulation, issue 13); of
// the same term, after a membership change, it takes the batch for the
// change's index, and every later entry is misplaced. So a batch must not
// be written before the entry is durable, whether the two came in one
// Write or, as the host also hands them, in two (two Readys, in one sync
// round or in overlapping ones).
func TestRaftBatchWaitsForTheEntryBeforeIt(t *testing.T) {
	newTerm := &pb.HardState{Term: new(uint64(2)), Vote: new(uint64(0)), Commit: new(uint64(1))}
	emptyEntry := &pb.Entry{Index: new(uint64(2)), Term: new(uint64(2)), Type: pb.EntryNormal.Enum()}
	addNode, err := proto.Marshal(&pb.ConfChange{Type: pb.ConfChangeAddNode.Enum(), NodeId: new(uint64(2))})
	if err != nil {
		t.Fatal(err)
	}
	confChange := &pb.Entry{Index: new(uint64(2)), Term: new(uint64(1)), Type: pb.EntryConfChange.Enum(), Data: addNode}
	batchOf := func(term uint64) *pb.Entry {
		return &pb.Entry{Index: new(uint64(3)), Term: new(term), Type: pb.EntryNormal.Enum(),
			Data: record.NewBatch(1, []record.Record{{Value: []byte("v")}})}
	}
	for name, writes := range map[string][]*raft.Write{
		"new term, one write":           {{HardState: newTerm, Entries: []*pb.Entry{emptyEntry, batchOf(2)}}},
		"new term, two writes":          {{HardState: newTerm, Entries: []*pb.Entry{emptyEntry}}, {Entries: []*pb.Entry{batchOf(2)}}},
		"membership change, two writes": {{Entries: []*pb.Entry{confChange}}, {Entries: []*pb.Entry{batchOf(1)}}},
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
			if r.lastIndex() != 3 || r.slotAt(2).meta == nil || r.slotAt(3).meta != nil || r.slotAt(3).end != 1 {
				t.Fatalf("after the power cut: entries up to %d, %s; want entry 2 without records, entry 3 the batch [0, 0]",
					r.lastIndex(), describeSlots(r))
			}
		})
	}
}

// describeSlots lists the replica's entries: their terms and ends, and
// which carry no records.
func describeSlots(r *raftReplica) string {
	s := ""
	for i, sl := range r.slots {
		s += fmt.Sprintf("[entry %d term %d end %d records %v] ", r.anchor.index+uint64(i)+1, sl.term, sl.end, sl.meta == nil)
	}
	return s
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
