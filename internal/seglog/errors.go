package seglog

import (
	"errors"
	"fmt"
)

var (
	// ErrOffsetOutOfRange is returned for an offset below the log start
	// offset or above the log end offset.
	ErrOffsetOutOfRange = errors.New("seglog: offset out of range")
	// ErrClosed is returned by every method of a closed log. From Sync and
	// WaitDurable it means the data waited for is not known to be durable
	// (a waiter whose data Close's final fsync covered gets nil instead),
	// so it must never be taken for success.
	ErrClosed = errors.New("seglog: log is closed")
	// ErrTruncated is a durability wait for offsets TruncateTo cut (or
	// that were never written): they will never be durable.
	ErrTruncated = errors.New("seglog: offsets truncated")
)

// CorruptionError reports a record batch that failed verification where the
// log cannot simply drop it: below the recovery point, before the last
// segment, or with valid batches after it. The partition must stay offline
// until an operator looks at File; nothing has been truncated.
type CorruptionError struct {
	File string // path of the .log segment file
	Pos  int64  // byte position of the bad batch in File
	Err  error  // what was wrong with it (wraps record.ErrCorrupt / record.ErrShort where applicable)
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("corrupt record batch at %s:%d: %v", e.File, e.Pos, e.Err)
}

func (e *CorruptionError) Unwrap() error { return e.Err }
