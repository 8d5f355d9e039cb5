package replica

import "fmt"

// FsyncPolicy says which acknowledgements wait for the commit (an fsync on
// a single node), wharf serve's --fsync. Whatever the policy, a log with a
// Flusher has everything it holds fsynced every flush interval, and
// earlier once flushAheadBytes of appends no acknowledgement waited for
// have gathered (flusher.go).
type FsyncPolicy int

const (
	// FsyncOnAcksAll waits for the commit before acknowledging acks=all
	// writes (AppendOptions.AckCommitted); acks=0 and acks=1 are
	// acknowledged once written. Like Redpanda, unlike Kafka: on one node
	// nothing else protects the data. The default.
	FsyncOnAcksAll FsyncPolicy = iota
	// FsyncAlways waits for the commit before acknowledging every write.
	FsyncAlways
	// FsyncInterval never waits on the acknowledgement path; data reaches
	// the disk within the flush interval (Kafka's default behaviour).
	FsyncInterval
)

func (p FsyncPolicy) String() string {
	switch p {
	case FsyncOnAcksAll:
		return "acks-all"
	case FsyncAlways:
		return "always"
	case FsyncInterval:
		return "interval"
	}
	return fmt.Sprintf("FsyncPolicy(%d)", int(p))
}

// ParseFsyncPolicy reads the names String returns.
func ParseFsyncPolicy(s string) (FsyncPolicy, error) {
	for _, p := range []FsyncPolicy{FsyncOnAcksAll, FsyncAlways, FsyncInterval} {
		if p.String() == s {
			return p, nil
		}
	}
	return 0, fmt.Errorf("unknown fsync policy %q (want acks-all, always or interval)", s)
}

// waitsForCommit reports whether an acknowledgement of a write waits for
// its commit: committed says the writer acknowledges committed data only
// (Kafka acks=all).
func (p FsyncPolicy) waitsForCommit(committed bool) bool {
	switch p {
	case FsyncAlways:
		return true
	case FsyncOnAcksAll:
		return committed
	}
	return false
}
