package jetstream

import (
	"strings"

	"github.com/wharf-mq/wharf/internal/replica"
)

// LogStore keeps the logs of streams. The node's keeps each in the Kafka
// topic TopicName(stream) of one partition, through the log seam, so a
// Kafka client reads a stream's messages there.
type LogStore interface {
	// CreateLog creates the empty log of a new stream; it fails if one
	// is there (a Kafka topic of that name, or one colliding with it).
	CreateLog(stream string) (StreamLog, error)
	// OpenLog opens the log of an existing stream.
	OpenLog(stream string) (StreamLog, error)
	// DeleteLog deletes a stream's log; a missing one is not an error.
	DeleteLog(stream string) error
}

// StreamLog is one stream's log: the message of sequence s is at offset
// s-1.
type StreamLog interface {
	// Append writes one record batch at the end and returns the offset of
	// its first record, without waiting for it to be committed.
	Append(batch []byte) (offset int64, err error)
	// Sync returns once everything appended is committed (fsynced): a
	// publish is acknowledged only after it (a replica.Target).
	Sync() error
	// Read returns whole batches from the one holding offset, up to
	// about maxBytes (at least one batch); the caller releases it.
	Read(offset, maxBytes int64) (*replica.Slice, error)
	StartOffset() int64
	EndOffset() int64
	// DeleteBefore moves the log start to offset: messages removed from
	// the head of the stream leave the log, and Kafka consumers.
	DeleteBefore(offset int64) error
	// OffsetForTime finds the first record stamped at or after ms.
	OffsetForTime(ms int64) (offset int64, found bool, err error)
}

// Definitions is the durable key-value store that holds the definitions
// of streams and consumers (the node's metadata log).
type Definitions interface {
	Put(key string, value []byte) error
	Delete(key string) error
	Load(fn func(key string, value []byte) error) error
}

// DefinedStreams names the streams defs defines, sorted, without opening
// them: a node that does not run the core (a cluster node) tells its
// operator where the streams an earlier version made keep their messages.
func DefinedStreams(defs Definitions) ([]string, error) {
	var names []string
	err := defs.Load(func(key string, _ []byte) error {
		if name, ok := strings.CutPrefix(key, streamDefPrefix); ok {
			names = append(names, name)
		}
		return nil
	})
	return names, err
}
