package broker

import (
	"errors"
	"fmt"
	"testing"

	"github.com/wharf-mq/wharf/internal/replica"
)

// TestStorageErrorOfARefusedAppend: an append Raft refused (leadership
// moving, followers too far behind) is a retriable not-leader error for
// the client, not a storage failure (KAFKA_STORAGE_ERROR): nothing is
// wrong with the disk, and the client should look for the leader again.
func TestStorageErrorOfARefusedAppend(t *testing.T) {
	p := &Partition{topic: &Topic{name: "t"}, index: 0}
	for _, cause := range []error{
		fmt.Errorf("%w: raft proposal dropped", replica.ErrAppendRefused),
		replica.ErrNotLeader,
		replica.ErrTruncated,
	} {
		if err := p.storageError("append", cause); !errors.Is(err, ErrNotLeader) || errors.Is(err, ErrStorage) {
			t.Errorf("%v: got %v, want ErrNotLeader", cause, err)
		}
	}
	if err := p.storageError("append", errors.New("disk full")); !errors.Is(err, ErrStorage) {
		t.Errorf("a disk failure: got %v, want ErrStorage", err)
	}
}
