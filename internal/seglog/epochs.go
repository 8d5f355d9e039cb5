package seglog

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// The leader epoch index.
//
// Every batch carries the leader epoch it was written under in its
// PartitionLeaderEpoch field (Append stamps it, AppendAt keeps the one it
// is given). The index lists where each epoch begins: entries (epoch,
// start offset), both strictly increasing, as Kafka's LeaderEpochFileCache
// does. A batch's epoch is that of the last entry starting at or below its
// offset, and 0 below the first entry. So epoch 0 needs no entry of its
// own: a log that never left epoch 0 (every log of a single node) has an
// empty index and no file, and costs nothing. Replication asks the index
// for the epoch of an offset (Raft's Term(i)) and where an epoch ends
// (where a follower's log diverges from its leader's).
//
// The index is kept in memory and in epochFile, in the format of Kafka's
// leader-epoch-checkpoint: a version line (0), a count line, then one
// "epoch startOffset" line per entry. The file is replaced (write, fsync,
// rename, directory fsync) whenever the entries change, and a new epoch's
// entry is durable before the first batch of that epoch is written, so a
// batch never outlives its entry. What a crash can leave is the reverse,
// entries past the end of the log (their batches torn off), which Open
// drops. Open also rebuilds entries from the batches it verifies after an
// unclean stop, so an index that lost its file (or never had one) still
// covers everything above the recovery point.

// epochVersion is the version line of the epoch index file.
const epochVersion = 0

// EpochStart is one entry of the epoch index: the first offset written
// under Epoch.
type EpochStart struct {
	Epoch       int32
	StartOffset int64
}

// ErrEpochRegressed is an append at a leader epoch below the log's latest:
// a deposed leader's write, or a follower fed out of order.
var ErrEpochRegressed = errors.New("seglog: leader epoch below the log's latest")

// epochIndex is the in-memory index; guarded by Log.mu.
type epochIndex struct {
	entries []EpochStart
}

// latest is the epoch of the last entry, 0 if there is none.
func (x *epochIndex) latest() int32 {
	if len(x.entries) == 0 {
		return 0
	}
	return x.entries[len(x.entries)-1].Epoch
}

// at is the epoch of offset.
func (x *epochIndex) at(offset int64) int32 {
	i := sort.Search(len(x.entries), func(i int) bool { return x.entries[i].StartOffset > offset })
	if i == 0 {
		return 0
	}
	return x.entries[i-1].Epoch
}

// assign notes that the batch at offset carries epoch and reports whether
// that changed the index: only an epoch above the latest does (epoch 0 at
// the start never needs an entry). It replaces entries at or past offset,
// which name no batch (an append that failed after its epoch was
// recorded). A lower epoch is left to the caller to refuse or ignore.
func (x *epochIndex) assign(epoch int32, offset int64) bool {
	if epoch <= x.latest() {
		return false
	}
	x.truncateTo(offset)
	x.entries = append(x.entries, EpochStart{Epoch: epoch, StartOffset: offset})
	return true
}

// truncateTo drops the entries starting at or after end (the log was cut
// there) and reports whether any went.
func (x *epochIndex) truncateTo(end int64) bool {
	i := sort.Search(len(x.entries), func(i int) bool { return x.entries[i].StartOffset >= end })
	if i == len(x.entries) {
		return false
	}
	x.entries = x.entries[:i:i]
	return true
}

// truncateFromStart drops the entries wholly below a new log start offset,
// keeping the epoch of start itself as an entry at start (Kafka's
// truncateFromStart), and reports whether anything changed.
func (x *epochIndex) truncateFromStart(start int64) bool {
	i := sort.Search(len(x.entries), func(i int) bool { return x.entries[i].StartOffset > start })
	if i == 0 || (i == 1 && x.entries[0].StartOffset == start) {
		return false
	}
	kept := append([]EpochStart{{Epoch: x.entries[i-1].Epoch, StartOffset: start}}, x.entries[i:]...)
	x.entries = kept
	return true
}

// encode renders the entries in the leader-epoch-checkpoint format.
func (x *epochIndex) encode() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d\n%d\n", epochVersion, len(x.entries))
	for _, e := range x.entries {
		fmt.Fprintf(&b, "%d %d\n", e.Epoch, e.StartOffset)
	}
	return b.Bytes()
}

// readEpochFile reads dir's epoch index; a missing file is an empty index.
func readEpochFile(dir string) (epochIndex, error) {
	b, err := os.ReadFile(filepath.Join(dir, epochFile))
	if errors.Is(err, os.ErrNotExist) {
		return epochIndex{}, nil
	}
	if err != nil {
		return epochIndex{}, err
	}
	return decodeEpochs(b)
}

func decodeEpochs(b []byte) (epochIndex, error) {
	bad := func(why string, args ...any) (epochIndex, error) {
		return epochIndex{}, fmt.Errorf("seglog: %s: %s", epochFile, fmt.Sprintf(why, args...))
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) < 2 {
		return bad("%d lines, want a version and a count", len(lines))
	}
	if v, err := strconv.Atoi(lines[0]); err != nil || v != epochVersion {
		return bad("version %q, want %d", lines[0], epochVersion)
	}
	n, err := strconv.Atoi(lines[1])
	if err != nil || n != len(lines)-2 {
		return bad("count %q for %d entries", lines[1], len(lines)-2)
	}
	var x epochIndex
	for _, line := range lines[2:] {
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return bad("entry %q", line)
		}
		epoch, err1 := strconv.ParseInt(fields[0], 10, 32)
		start, err2 := strconv.ParseInt(fields[1], 10, 64)
		if err1 != nil || err2 != nil || epoch < 0 || start < 0 {
			return bad("entry %q", line)
		}
		if k := len(x.entries); k > 0 && (int32(epoch) <= x.entries[k-1].Epoch || start <= x.entries[k-1].StartOffset) {
			return bad("entry %q does not increase", line)
		}
		x.entries = append(x.entries, EpochStart{Epoch: int32(epoch), StartOffset: start})
	}
	return x, nil
}

// writeEpochsLocked makes the in-memory index the durable one: the file is
// replaced, or removed when the index is empty. Caller holds mu.
func (l *Log) writeEpochsLocked() error {
	if len(l.epochs.entries) == 0 {
		err := os.Remove(l.path(epochFile))
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err == nil {
			err = syncDir(l.dir)
		}
		return err
	}
	return writeSmallFile(l.dir, epochFile, l.epochs.encode(), true)
}

// stampEpochLocked makes epoch the epoch of the batches about to be
// written at the end of the log: a new entry, durable before they are
// written, when it is above the latest. Caller holds mu.
func (l *Log) stampEpochLocked(epoch int32) error {
	switch latest := l.epochs.latest(); {
	case epoch < latest:
		return fmt.Errorf("%w: %d, the log is at %d", ErrEpochRegressed, epoch, latest)
	case epoch == latest:
		return nil
	}
	l.epochs.assign(epoch, l.end)
	if err := l.writeEpochsLocked(); err != nil {
		l.epochs.truncateTo(l.end)
		return fmt.Errorf("seglog: record leader epoch %d: %w", epoch, err)
	}
	return nil
}

// EpochAt returns the leader epoch of the batch holding offset: what Raft
// calls the term of an entry. offset outside [StartOffset, EndOffset) is
// ErrOffsetOutOfRange.
func (l *Log) EpochAt(offset int64) (int32, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return 0, ErrClosed
	}
	if offset < l.start || offset >= l.end {
		return 0, ErrOffsetOutOfRange
	}
	return l.epochs.at(offset), nil
}

// LatestEpoch is the epoch of the log's last batch (0 for an empty log that
// never left epoch 0): the epoch an append continues in.
func (l *Log) LatestEpoch() int32 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.epochs.latest()
}

// Epochs returns a copy of the epoch index: where each epoch above 0
// begins, oldest first.
func (l *Log) Epochs() []EpochStart {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return append([]EpochStart(nil), l.epochs.entries...)
}
