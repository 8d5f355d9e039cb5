package replica

import "github.com/wharf-mq/wharf/internal/seglog"

// CommitObserver hears of every successful commit round of every local
// log in the process: how long its fsync took and how many offsets it made
// durable (the group-commit batch). It runs under the log's lock, so it
// must be quick and must not call into the log.
type CommitObserver = seglog.CommitObserver

// SetCommitObserver installs fn for every local log (nil removes it), for
// the fsync latency and group-commit batch size metrics. Unset, it costs
// one atomic load per commit round.
func SetCommitObserver(fn CommitObserver) { seglog.SetCommitObserver(fn) }
