package broker

import "github.com/wharf-mq/wharf/internal/replica"

// Where a leader epoch ends (OffsetForLeaderEpoch, KIP-101 and KIP-320).
//
// A consumer that read records written under epoch e asks the leader, after
// a leader change, where e ends in the leader's log: if that is below its
// position, the log it read from was truncated. Every batch carries its
// epoch (the Raft term in a cluster, 0 on a single node), and the log
// keeps the epoch index (where each epoch begins), so the answer is
// Kafka's LeaderEpochFileCache.endOffsetFor over that index.

// EpochEnd returns the largest epoch at or below epoch that this log
// holds, and the offset where epoch ends: the start of the next epoch
// above it, or the log end offset if epoch is the leader's current one.
// An epoch above every epoch known, or -1, gets (-1, -1)
// (UNDEFINED_EPOCH_OFFSET), as an epoch below every one known gets
// (epoch, the start of the first). It fails as the partition's reads do
// on a node that does not lead it or with the partition offline.
func (p *Partition) EpochEnd(epoch int32) (leaderEpoch int32, endOffset int64, err error) {
	log, err := p.online()
	if err != nil {
		return -1, -1, err
	}
	current, _ := p.Leading()
	leaderEpoch, endOffset = epochEnd(epochStarts(log, int32(current)), epoch, log.EndOffset())
	return leaderEpoch, endOffset, nil
}

// epochEnd is Kafka's LeaderEpochFileCache.endOffsetFor over starts (never
// empty, the last the current epoch), for a log ending at logEnd.
func epochEnd(starts []replica.EpochStart, epoch int32, logEnd int64) (int32, int64) {
	switch {
	case epoch < 0:
		return -1, -1
	case epoch == starts[len(starts)-1].Epoch:
		return epoch, logEnd
	}
	higher := 0
	for higher < len(starts) && starts[higher].Epoch <= epoch {
		higher++
	}
	switch {
	case higher == len(starts):
		return -1, -1 // an epoch this log has not reached
	case higher == 0:
		return epoch, starts[0].StartOffset // before every epoch here
	}
	return starts[higher-1].Epoch, starts[higher].StartOffset
}

// epochStarts is the log's epoch index made whole: epoch 0 from the log
// start if it has batches of it (the index lists epochs above 0 only), and
// the leader's current epoch from the log end if it has written nothing
// in it yet (Kafka's leader records its epoch as it takes over). Never
// empty.
func epochStarts(log replica.Log, current int32) []replica.EpochStart {
	index := log.Epochs()
	start, end := log.StartOffset(), log.EndOffset()
	var out []replica.EpochStart
	firstAbove0 := end
	if len(index) > 0 {
		firstAbove0 = index[0].StartOffset
	}
	if start < firstAbove0 || len(index) == 0 && current == 0 {
		out = append(out, replica.EpochStart{Epoch: 0, StartOffset: start})
	}
	out = append(out, index...)
	if len(out) == 0 || out[len(out)-1].Epoch < current {
		out = append(out, replica.EpochStart{Epoch: current, StartOffset: end})
	}
	return out
}
