package replica

// SetStateSyncHook installs fn as the state files' fsync observer (nil
// removes it) and returns a function restoring the previous one.
func SetStateSyncHook(fn func(path string, size int64)) (restore func()) {
	var p *func(string, int64)
	if fn != nil {
		p = &fn
	}
	prev := stateSyncHook.Swap(p)
	return func() { stateSyncHook.Store(prev) }
}

// Entries is the replica's etcd raft Storage.Entries, as a leader's Raft
// reads its log to send a follower appends.
func (l *RaftLog) Entries(lo, hi, maxSize uint64) (int, error) {
	ents, err := l.rep.Entries(lo, hi, maxSize)
	return len(ents), err
}
