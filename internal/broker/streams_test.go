package broker

import (
	"testing"

	"github.com/wharf-mq/wharf/internal/mq"
)

// TestStreamSyncFailsOnClosedLog: once a stream's log is closed (its topic
// deleted here) Sync must fail: it cannot know whether the appends before
// reached the disk, and a publisher confirm must not say they did.
func TestStreamSyncFailsOnClosedLog(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	defer b.Close()
	store := streamStore{b}
	st, err := store.CreateStream("events", mq.StreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(batchOf("x")); err != nil {
		t.Fatal(err)
	}
	if err := st.Sync(); err != nil {
		t.Fatalf("Sync of an open stream: %v", err)
	}
	if err := store.DeleteStream("events"); err != nil {
		t.Fatal(err)
	}
	if err := st.Sync(); err == nil {
		t.Error("Sync of a stream whose log is closed reported success")
	}
}
