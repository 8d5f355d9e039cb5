package replica

import (
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/raft"
	"github.com/wharf-mq/wharf/internal/record"
	"github.com/wharf-mq/wharf/internal/seglog"
	pb "go.etcd.io/raft/v3/raftpb"
)

// TestRaftSyncBesideACut: the host runs up to SyncRounds sync rounds at
// once, each syncing the groups that wrote in it, while its loop goes on
// writing, and a write may cut the log (a follower's suffix that
// diverged from a new leader's). A round's Sync that waits for another
// round's fsync when the cut comes finds the offsets it waited for cut:
// what was written up to its call is still made durable (the cut fsyncs
// what it keeps), so Sync succeeds. Failing it, as a wait for cut offsets
// fails, failed the group: the follower out of service, at a change of
// leader, until its node restarted.
//
// The interleaving: round A's fsync runs (held here by the fault hook);
// the loop cuts, which waits for that fsync; round B's Sync comes and
// waits for it too. Once the fsync ends, the cut and round B race for the
// log's lock: the cut usually wins, so the scenario runs a few times.
func TestRaftSyncBesideACut(t *testing.T) {
	const runs = 10
	failed := 0
	for i := range runs {
		if err := syncBesideACut(t, filepath.Join(t.TempDir(), "replica")); err != nil {
			t.Errorf("run %d: %v", i, err)
			failed++
		}
	}
	if failed > 0 {
		t.Fatalf("a Sync beside a cut failed in %d of %d runs", failed, runs)
	}
}

// syncBesideACut runs the scenario once in dir and returns round B's
// Sync's error (round A's must succeed).
func syncBesideACut(t *testing.T, dir string) error {
	t.Helper()
	l := openRaftUnhosted(t, dir)
	defer l.Close()
	r := l.rep
	// Entries 2 to 4 of term 1, one record each, and durable.
	var ents []*pb.Entry
	for i := range 3 {
		b := record.NewBatch(1, []record.Record{{Value: []byte("v")}})
		record.SetBaseOffset(b, int64(i))
		ents = append(ents, &pb.Entry{Index: new(uint64(i + 2)), Term: new(uint64(1)), Type: pb.EntryNormal.Enum(), Data: b})
	}
	hostWrite(t, r, &raft.Write{Entries: ents})
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}

	// Round A: one more entry, whose fsync is held.
	more := record.NewBatch(1, []record.Record{{Value: []byte("w")}})
	record.SetBaseOffset(more, 3)
	hostWrite(t, r, &raft.Write{Entries: []*pb.Entry{{Index: new(uint64(5)), Term: new(uint64(1)), Type: pb.EntryNormal.Enum(), Data: more}}})
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	restore := seglog.SetSyncFault(func(path string) error {
		if strings.HasSuffix(path, ".log") && strings.HasPrefix(path, dir) {
			once.Do(func() {
				close(held)
				<-release
			})
		}
		return nil
	})
	defer restore()
	roundA := make(chan error, 1)
	go func() { roundA <- r.Sync() }()
	<-held

	// The loop: a leader of term 2 has another entry 4, so 4 and 5 go.
	cut := make(chan error, 1)
	go func() {
		_, err := r.Write(&raft.Write{
			HardState: &pb.HardState{Term: new(uint64(2)), Vote: new(uint64(0)), Commit: new(uint64(1))},
			Entries:   []*pb.Entry{{Index: new(uint64(4)), Term: new(uint64(2)), Type: pb.EntryNormal.Enum()}},
		})
		cut <- err
	}()
	waitForGoroutine(t, "seglog.(*Log).TruncateTo", "sync.(*Cond).Wait")

	// Round B, with nothing more of its own: it waits for round A's fsync.
	roundB := make(chan error, 1)
	go func() { roundB <- r.Sync() }()
	waitForGoroutine(t, "seglog.(*Log).waitDurableLocked", "sync.(*Cond).Wait")
	close(release)

	if err := <-roundA; err != nil {
		t.Fatalf("round A's Sync: %v", err)
	}
	if err := <-cut; err != nil {
		t.Fatalf("the cut: %v", err)
	}
	return <-roundB
}

// waitForGoroutine waits until a goroutine's stack holds every one of
// frames: one blocked in them.
func waitForGoroutine(t *testing.T, frames ...string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := runtime.Stack(buf, true)
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			all := true
			for _, f := range frames {
				all = all && strings.Contains(g, f)
			}
			if all {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no goroutine in %v after 10s", frames)
		}
		time.Sleep(time.Millisecond)
	}
}
