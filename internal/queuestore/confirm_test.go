package queuestore

import (
	"testing"

	"github.com/wharf-mq/wharf/internal/replica"
)

// A confirm never goes out for a message its store did not make durable,
// even when the store is closed while the confirm waits: a close that
// fails to write the held-back messages fails their confirms.
func TestConfirmFailsWhenCloseLosesTheMessage(t *testing.T) {
	e := newEnv(t)
	q := e.create("q")
	q.append("first") // creates the log
	q.sync()
	q.buffer("held back")
	// A log that takes no more writes, as after an I/O error.
	if err := q.s.messages.Load().Close(); err != nil {
		t.Fatal(err)
	}
	if err := q.s.close(); err == nil {
		t.Fatal("close wrote the held-back message to a closed log")
	}
	syncer := replica.StartSyncer()
	defer syncer.Shutdown()
	confirmed := make(chan error, 1)
	syncer.Await([]replica.Target{q.s}, func(err error) { confirmed <- err })
	if err := <-confirmed; err == nil {
		t.Fatal("confirmed a message its store never wrote")
	}
}
