package replica_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/wharf-mq/wharf/internal/raft"
	"github.com/wharf-mq/wharf/internal/record"
	"github.com/wharf-mq/wharf/internal/replica"
)

// TestRaftFollowersWritePastThePageCache: a follower's log writes past the
// page cache (StateChanged's WriteDirect), its leader's through it, for
// its readers. Seen from the page cache: of the MiB a leader replicated,
// (almost) no page of a follower's segment is cached, and (almost) every
// page of the leader's is. After a leadership transfer the roles, and
// what is cached of what is written next, swap.
func TestRaftFollowersWritePastThePageCache(t *testing.T) {
	base := directDisk(t)
	net := raft.NewMemNetwork()
	logs := make([]*replica.RaftLog, 3)
	for i := range logs {
		// A leader's loop busy writing for 4 ticks says it leads no
		// more (raft's Host.alive); 10 ms ticks make that frequent
		// under -race.
		h := startHostTicking(t, uint64(i+1), net, 50*time.Millisecond)
		logs[i] = openRaft(t, filepath.Join(base, fmt.Sprint(i+1)), h, 1, 2, 3)
		t.Cleanup(func() { logs[i].Close() })
	}
	first := leaderOf(t, logs)
	checkCachedAsWritten(t, logs, first)
	checkCachedAsWritten(t, logs, logs[(slices.Index(logs, first)+1)%len(logs)])
}

// checkCachedAsWritten makes leader the group's leader, appends 4 MiB
// through it, and checks what the page cache holds of what each replica
// wrote meanwhile: the leader's pages (at least three quarters of them:
// only a shortage of memory would evict any), none of a follower's but a
// few (at most one in eight: a direct write reads the block its segment
// ends in once). An election may come in between under -race on a busy
// machine, or the leader's loop stall long enough for it to stop saying
// it leads (raft's Host.alive): then it starts over, as the roles must
// hold for the whole write.
func checkCachedAsWritten(t *testing.T, logs []*replica.RaftLog, leader *replica.RaftLog) {
	t.Helper()
	var err error
	for range 5 {
		transferTo(t, logs, leader)
		term := leader.Group().Status().Term
		from := make([]int64, len(logs))
		for i, l := range logs {
			from[i] = l.Size() // one segment: they are 1 GiB each
		}
		if err = appendMiB(logs, leader, 4); err != nil || leader.Group().Status().Term != term {
			t.Logf("leadership lost in term %d (%v, %+v): writing again", term, err, leader.Group().Status())
			continue
		}
		bad := ""
		for i, l := range logs {
			cached, pages := cachedPages(t, activeSegment(t, l), from[i], l.Size())
			if l == leader && cached < pages*3/4 || l != leader && cached > pages/8 {
				bad = "; want most of the leader's, few of a follower's"
			}
			role := map[bool]string{true: "leader", false: "follower"}[l == leader]
			t.Logf("node %d (%s): %d of the %d pages written cached", i+1, role, cached, pages)
		}
		if bad != "" {
			t.Fatal("cached pages wrong" + bad + " (see the log above)")
		}
		return
	}
	t.Fatalf("leadership lost during each of 5 tries to write with the same leader (last: %v)", err)
}

// appendMiB appends mib MiB through leader, and waits until every replica
// has it.
func appendMiB(logs []*replica.RaftLog, leader *replica.RaftLog, mib int) error {
	recs := make([]record.Record, 16)
	for i := range recs {
		recs[i].Value = make([]byte, 16<<10) // a batch of 256 KiB
	}
	var last replica.Appended
	for range mib * 4 {
		a, err := leader.Append(record.NewBatch(time.Now().UnixMilli(), recs), replica.AppendOptions{AckCommitted: true})
		if err != nil {
			return err
		}
		last = a
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := last.Ack.Wait(ctx); err != nil {
		return err
	}
	for _, l := range logs { // until the high watermark passes the last offset
		if err := l.WaitHighWatermark(ctx, last.LastOffset); err != nil {
			return err
		}
	}
	return nil
}

// transferTo makes next the group's leader, and the only node that
// thinks it leads.
func transferTo(t *testing.T, logs []*replica.RaftLog, next *replica.RaftLog) {
	t.Helper()
	id := uint64(slices.Index(logs, next) + 1)
	deadline := time.Now().Add(10 * time.Second)
	for !next.Group().Status().Leading() {
		if time.Now().After(deadline) {
			t.Fatalf("node %d does not lead 10s after a transfer to it: %+v", id, next.Group().Status())
		}
		if leader := leaderOf(t, logs); leader != next {
			leader.Group().TransferLeadership(id)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// An old leader learns of the new one at its first message.
	for _, l := range logs {
		for l != next && l.Group().Status().Leading() {
			if time.Now().After(deadline) {
				t.Fatalf("a node still leads 10s after node %d took over", id)
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// activeSegment is the path of l's active segment file.
func activeSegment(t *testing.T, l *replica.RaftLog) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(l.Dir(), "log", "*.log"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no segment file under %s (%v)", l.Dir(), err)
	}
	return slices.Max(files) // names are zero-padded base offsets
}

// cachedPages counts the pages of path's bytes [from, to) that are in the
// page cache (mincore on a mapping of the file, which faults none in).
func cachedPages(t *testing.T, path string, from, to int64) (cached, pages int) {
	t.Helper()
	page := int64(os.Getpagesize())
	from &^= page - 1
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), from, int(to-from), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (int64(len(m))+page-1)/page)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	for _, v := range vec {
		cached += int(v & 1)
	}
	return cached, len(vec)
}

// directDisk returns an empty directory on a file system where O_DIRECT
// writes go past the page cache: t.TempDir(), or one under /var/tmp when
// that is a tmpfs (which takes O_DIRECT but caches what it writes all the
// same). Where there is none the test fails: passing, it would prove
// nothing, and skipping would hide that.
func directDisk(t *testing.T) string {
	t.Helper()
	tmp := t.TempDir()
	dir := tmp
	if onTmpfs(t, tmp) {
		var err error
		if dir, err = os.MkdirTemp("/var/tmp", "replica-direct-"); err != nil {
			t.Fatalf("%s is a tmpfs and /var/tmp takes no directory (%v): this test needs a disk-backed file system", tmp, err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if onTmpfs(t, dir) {
			t.Fatalf("%s and /var/tmp are tmpfs: this test needs a disk-backed file system (set TMPDIR to one)", tmp)
		}
	}
	probe := filepath.Join(dir, "probe")
	block, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE) // page-aligned
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(block)
	f, err := os.OpenFile(probe, os.O_CREATE|os.O_WRONLY|unix.O_DIRECT, 0o644)
	if err == nil {
		_, err = f.Write(block)
		f.Close()
	}
	if err != nil {
		t.Fatalf("the file system under %s refuses O_DIRECT (%v): this test needs one that takes it (ext4, xfs)", dir, err)
	}
	os.Remove(probe)
	return dir
}

func onTmpfs(t *testing.T, dir string) bool {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return st.Type == unix.TMPFS_MAGIC
}
