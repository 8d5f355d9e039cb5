package replica_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/raft"
	"github.com/wharf-mq/wharf/internal/record"
	"github.com/wharf-mq/wharf/internal/replica"
	"github.com/wharf-mq/wharf/internal/replica/replicatest"
)

var quiet = slog.New(slog.DiscardHandler)

// startHost starts a host for node id on net (nil: no peers), closed by
// the test's cleanup.
func startHost(t testing.TB, id uint64, net *raft.MemNetwork) *raft.Host {
	t.Helper()
	cfg := raft.Config{NodeID: id, TickInterval: 10 * time.Millisecond, Logger: quiet}
	if net != nil {
		cfg.Transport = net.Transport(id)
	}
	h, err := raft.NewHost(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if net != nil {
		net.Register(id, h)
	}
	h.Start()
	t.Cleanup(h.Close)
	return h
}

func openRaft(t testing.TB, dir string, h *raft.Host, members ...uint64) *replica.RaftLog {
	t.Helper()
	l, err := replica.OpenRaft(dir, replica.DefaultConfig(), replica.RaftOptions{Host: h, Group: 7, Members: members, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func waitLeading(t testing.TB, l *replica.RaftLog) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !l.Group().Status().Leading() {
		if time.Now().After(deadline) {
			t.Fatalf("no leader after 10s: %+v", l.Group().Status())
		}
		time.Sleep(time.Millisecond)
	}
}

func testBatch(n int) []byte {
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Value: []byte("v")}
	}
	return record.NewBatch(time.Now().UnixMilli(), recs)
}

func TestRaftLogSingleNode(t *testing.T) {
	h := startHost(t, 1, nil)
	l := openRaft(t, t.TempDir(), h, 1)
	defer l.Close()
	waitLeading(t, l)
	a, err := l.Append(testBatch(3), replica.AppendOptions{AckCommitted: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Ack.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a.BaseOffset != 0 || a.LastOffset != 2 || l.HighWatermark() != 3 {
		t.Fatalf("append at [%d, %d], high watermark %d", a.BaseOffset, a.LastOffset, l.HighWatermark())
	}
}

// hostedLog is a Raft log alone on its own host, which Close stops too.
type hostedLog struct {
	*replica.RaftLog
	host *raft.Host
}

func (l hostedLog) Close() error {
	err := l.RaftLog.Close()
	l.host.Close()
	return err
}

// TestRaftLogConformance runs the seam's conformance suite against a Raft
// log whose group has one member: the storage, the host's loop and its
// sync rounds, commits and leader changes (each reopen is a new term) are
// the ones every group uses; what more members add is the simulation's.
func TestRaftLogConformance(t *testing.T) {
	open := func(t *testing.T, dir string) replica.Log {
		cfg := replica.DefaultConfig()
		cfg.SegmentBytes = 1024 // several segments from little data
		h := startHost(t, 1, nil)
		l, err := replica.OpenRaft(dir, cfg, replica.RaftOptions{Host: h, Group: 7, Members: []uint64{1}, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		waitLeading(t, l)
		return hostedLog{RaftLog: l, host: h}
	}
	lead := func(t *testing.T, l replica.Log) replica.Log {
		dir := l.Dir()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		return open(t, dir)
	}
	replicatest.RunReplicated(t, open, lead)
}
