package mq

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/wharf-mq/wharf/internal/queuestore"
)

func exists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Stat(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return err == nil
}

func (e *env) storeDir(queue string) string {
	e.t.Helper()
	q, err := e.v.lookupQueue(queue)
	if err != nil {
		e.t.Fatal(err)
	}
	return q.store.Dir()
}

// Declaring a durable queue writes its definition and no file: the queue
// survives a crash empty. Its directory and messages log come with its
// first persistent message, the settlement log with its first settlement.
func TestDurableQueueFilesCreatedOnFirstUse(t *testing.T) {
	e := newEnv(t)
	e.declareQueue("q", true)
	dir := e.storeDir("q")
	if exists(t, dir) {
		t.Fatal("declare created the queue's directory")
	}
	e.crash()
	if n := e.messages("q"); n != 0 {
		t.Fatalf("declared queue holds %d messages after a crash", n)
	}
	if e.storeDir("q") != dir {
		t.Fatal("queue got another store after the crash")
	}

	e.publish(msg("", "q", "transient"))
	if exists(t, dir) {
		t.Fatal("a transient message created the queue's directory")
	}
	waitDurable(t, e.publish(persistent("", "q", "persistent")))
	if !exists(t, filepath.Join(dir, queuestore.MessagesLog)) || exists(t, filepath.Join(dir, queuestore.SettlementLog)) {
		t.Fatal("after the first persistent message: want the messages log only")
	}
	e.crash()
	if got := e.drain("q"); !slices.Equal(got, []string{"persistent"}) {
		t.Fatalf("after a crash the queue holds %q", got)
	}
	q, _ := e.v.lookupQueue("q")
	if err := q.local().Housekeep(); err != nil {
		t.Fatal(err)
	}
	if !exists(t, filepath.Join(dir, queuestore.SettlementLog)) {
		t.Fatal("settlement not written to a new settlement log")
	}
	e.restart()
	if n := e.messages("q"); n != 0 {
		t.Fatalf("settled message back after restart: %d messages", n)
	}
}

// Closing and deleting queues that never logged anything leaves no file.
func TestUnusedDurableQueuesLeaveNoFiles(t *testing.T) {
	e := newEnv(t)
	for _, name := range []string{"a", "b", "c"} {
		e.declareQueue(name, true)
	}
	e.restart()
	if _, err := e.v.DeleteQueue("b", false, false, 0); err != nil {
		t.Fatal(err)
	}
	e.restart()
	entries, err := os.ReadDir(filepath.Join(e.dir, queuesDirName))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("queue directories of unused queues: %v", entries)
	}
	for _, name := range []string{"a", "c"} {
		if n := e.messages(name); n != 0 {
			t.Errorf("%s holds %d messages", name, n)
		}
	}
	if _, err := e.v.DeclareQueue(QueueDef{Name: "b"}, true); err == nil {
		t.Error("deleted queue back after restart")
	}
}

// A queue directory without a messages log (a crash while the first
// message was being logged) is cleared at Open; the queue starts empty and
// a stale settlement log in it is not read into the new messages log.
func TestPartialQueueDirectoryCleared(t *testing.T) {
	e := newEnv(t)
	e.declareQueue("q", true)
	dir := e.storeDir("q")
	e.restart()
	stale := filepath.Join(dir, queuestore.SettlementLog)
	if err := os.MkdirAll(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stale, "junk"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.restart()
	if exists(t, stale) {
		t.Fatal("partial queue directory kept")
	}
	waitDurable(t, e.publish(persistent("", "q", "m")))
	e.crash()
	if got := e.drain("q"); !slices.Equal(got, []string{"m"}) {
		t.Fatalf("queue holds %q", got)
	}
}
