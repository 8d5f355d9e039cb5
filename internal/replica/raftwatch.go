package replica

// Changed is closed at the next change of the replica's Raft state (a
// new term, leader or role) or of its high watermark: a caller that
// follows leadership (a quorum queue's replica, internal/mq) reads
// Leadership, then waits on the channel it took before.
func (l *RaftLog) Changed() <-chan struct{} { return l.changedChan() }
