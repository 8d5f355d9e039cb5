package replica

import "context"

// Commit waits for the offsets below a point of one log to be committed
// (on a single node: fsynced; see the package doc). It is a small value:
// Append returns one for its batches (Appended.Ack) and Log.Commit makes
// one for any offset. The zero Commit has nothing to wait for.
//
// A Commit tells its offsets from batches written at the same offsets
// after a TruncateTo cut them: Wait then fails with ErrTruncated, however
// durable the new batches are.
type Commit struct {
	log  committer // nil: nothing to wait for
	upTo int64
	cuts int // the log's truncations when the offsets were written (Local)
}

// committer is what a Log implementation gives its Commits.
type committer interface {
	waitCommitted(ctx context.Context, upTo int64, cuts int) error
}

// Wait returns once the offsets are committed, with ErrClosed if the log
// was closed before (or ErrTruncated if they were cut, or the failure of
// the log's storage), or with ctx's error once ctx is done.
func (c Commit) Wait(ctx context.Context) error {
	if c.log == nil {
		return nil
	}
	return c.log.waitCommitted(ctx, c.upTo, c.cuts)
}
