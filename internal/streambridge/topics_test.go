package streambridge

import (
	"log/slog"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/mq"
	"github.com/wharf-mq/wharf/internal/record"
)

// TestStreamSyncFailsOnClosedLog: once a stream's log is closed (its topic
// deleted here) Sync must fail: it cannot know whether the appends before
// reached the disk, and a publisher confirm must not say they did.
func TestStreamSyncFailsOnClosedLog(t *testing.T) {
	b, err := broker.Open(broker.Config{DataDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	store := NewTopics(b)
	st, err := store.CreateStream("events", mq.StreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	batch := record.NewBatch(time.Now().UnixMilli(), []record.Record{{Value: []byte("x")}})
	if _, err := st.Append(batch); err != nil {
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
