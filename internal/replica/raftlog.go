package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wharf-mq/wharf/internal/raft"
	"github.com/wharf-mq/wharf/internal/record"
	pb "go.etcd.io/raft/v3/raftpb"
)

// RaftLog is a Log replicated by a Raft group (the package doc's step
// 2): every replica of a partition holds one, hosted by its node's
// raft.Host. The leader's appends are proposed to the group and committed
// once a majority of the replicas have them fsynced; the high watermark
// is the commit index, as an offset; followers are written by Raft, never
// by a core. Its directory holds the partition's log (logDir), the Raft
// state beside it (raftstate.go) and, while a snapshot is staged,
// stagingDir.
type RaftLog struct {
	dir     string
	release func() // of dir's reservation (raftdirs.go)
	rep     *raftReplica
	host    *raft.Host
	group   *raft.Group
	fsync   FsyncPolicy
	logger  *slog.Logger

	// The leader's offsets: the offset the next append gets, in the term
	// it leads. Appends are serialized by proposeMu; the offset moves only
	// when the group took the proposal.
	proposeMu sync.Mutex
	leaderEnd atomic.Pointer[termOffset]

	compacted atomic.Bool // the config asks for compaction (cleanup.policy=compact)

	status  atomic.Pointer[raft.Status]
	ledTerm atomic.Uint64 // the last term this node led and took proposals in
	notify  func(raft.Status)
	closed  atomic.Bool

	changedMu sync.Mutex
	changed   chan struct{} // closed and replaced when the state or the high watermark moves
}

// termOffset is an offset in a term.
type termOffset struct {
	term   uint64
	offset int64
}

// logDir is where a RaftLog keeps its segmented log.
const logDir = "log"

// RaftOptions say which group a RaftLog is and who hosts it.
type RaftOptions struct {
	// Host runs the group; Group is its id on every member.
	Host  *raft.Host
	Group uint64
	// Members are the group's initial voters, given when the group is
	// created (a static initial cluster, the same on every member); a
	// replica joining an existing group starts with none and learns them
	// from the leader's snapshot. Ignored once the log has a Raft state.
	Members []uint64
	// Fsync maps AppendOptions.AckCommitted to Appended.Ack, as for
	// Local: what acks=1 waits for (nothing) and acks=all (the commit).
	Fsync FsyncPolicy
	// Window is how many entries below the last applied one a replica
	// keeps indexed, so that a follower lagging by less catches up from
	// the log rather than from a snapshot (1024).
	Window int
	// Logger (nil: slog.Default).
	Logger *slog.Logger
	// StateChanged, if set, hears every change of the group's term,
	// leader or role, on the host's loop: it must not block.
	StateChanged func(raft.Status)
	// WholeSnapshots makes every snapshot install replace the whole log
	// with the leader's, from its start, rather than keep what this
	// replica had below its high watermark: for a log whose reader
	// rebuilds its state from the whole log after an install (Installs),
	// which a mix of its own records and a leader's compacted ones could
	// get wrong (a deletion the leader compacted away, of a key this
	// replica's own records set). KRaft loads a snapshot as a whole image.
	WholeSnapshots bool
}

// Errors of a RaftLog.
var (
	// ErrNotLeader: an append on a replica that does not lead its group
	// (Kafka's NOT_LEADER_OR_FOLLOWER), or a commit that was pending when
	// this replica stopped leading. A *NotLeaderError says who leads.
	ErrNotLeader = errors.New("replica: not the leader")
	// ErrReplicated: AppendAt and TruncateTo on a log that Raft writes.
	ErrReplicated = errors.New("replica: a Raft log's followers are written by Raft, not by AppendAt or TruncateTo")
	// ErrAppendRefused: the leader refused an append, because too much of
	// its log is not yet committed (followers slow or away) or leadership
	// is moving. The writer may retry.
	ErrAppendRefused = errors.New("replica: the leader refused the append")
)

// NotLeaderError is ErrNotLeader naming the leader this replica knows of
// (0 for none).
type NotLeaderError struct{ Leader uint64 }

func (e *NotLeaderError) Error() string {
	if e.Leader == 0 {
		return "replica: not the leader; no leader is known"
	}
	return fmt.Sprintf("replica: not the leader; node %d leads", e.Leader)
}

func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }

var _ Log = (*RaftLog)(nil)

// OpenRaft opens (creating if missing) the Raft log in dir and starts
// hosting its group. A new group's replicas are created with the same
// Members; a log that already holds records when its Raft state is first
// created keeps them, as the state its group starts from. Recovery (see
// raftrecover.go) refuses a replica whose log and Raft state disagree.
func OpenRaft(dir string, cfg Config, opt RaftOptions) (*RaftLog, error) {
	if opt.Host == nil {
		return nil, errors.New("replica: a Raft log needs a host")
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if opt.Window <= 0 {
		opt.Window = 1024
	}
	release, err := reserveDir(dir)
	if err != nil {
		return nil, err
	}
	l, err := openRaft(dir, cfg, opt)
	if err != nil {
		release()
		return nil, err
	}
	l.release = release
	return l, nil
}

// openRaft is OpenRaft in a directory reserved for it.
func openRaft(dir string, cfg Config, opt RaftOptions) (*RaftLog, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	state, st, err := openStateFile(dir)
	if err != nil {
		return nil, err
	}
	local, err := Open(filepath.Join(dir, logDir), cfg, Options{Logger: opt.Logger})
	if err != nil {
		state.close()
		return nil, err
	}
	l := &RaftLog{dir: dir, host: opt.Host, fsync: opt.Fsync, logger: opt.Logger.With("group", opt.Group), changed: make(chan struct{}), notify: opt.StateChanged}
	l.status.Store(&raft.Status{ID: opt.Group})
	l.compacted.Store(cfg.Compact)
	l.rep = &raftReplica{local: local, state: state, logger: l.logger, window: uint64(opt.Window), events: l, whole: opt.WholeSnapshots}
	if err := l.start(st, opt); err != nil {
		l.rep.close()
		return nil, err
	}
	return l, nil
}

// start recovers the replica (creating a new group's state first) and
// adds the group to the host.
func (l *RaftLog) start(st *raftState, opt RaftOptions) error {
	if st.anchor.index == 0 && st.hard.term == 0 && len(st.entries) == 0 {
		if err := l.create(st, opt.Members); err != nil {
			return err
		}
	}
	if err := l.rep.recover(st, l.dir); err != nil {
		return err
	}
	g, err := opt.Host.AddGroup(opt.Group, l.rep)
	if err != nil {
		return err
	}
	l.group = g
	g.SetForwardHandler(l.AppendCommitted) // proposals forwarded by the other replicas (Propose)
	return nil
}

// create writes a new replica's first state: for a member of a new group,
// the snapshot its group starts from (entry 1 of term 1, holding the
// records already in the log, and the members); for one joining, nothing
// (its log must be empty: the leader's snapshot fills it).
func (l *RaftLog) create(st *raftState, members []uint64) error {
	local := l.rep.local
	if len(members) == 0 {
		if local.EndOffset() != local.StartOffset() {
			return fmt.Errorf("replica: a replica joining a group must start empty; %s holds records", local.Dir())
		}
		st.anchor = anchor{offset: local.EndOffset()}
		return nil
	}
	st.anchor = anchor{index: 1, term: 1, offset: local.EndOffset(), config: &pb.ConfState{Voters: members}}
	st.hard = hardState{term: 1, commit: 1}
	st.config, st.configIndex = st.anchor.config, 1
	l.rep.state.add(recHardState, uint64(1), uint64(0), uint64(1))
	l.rep.state.add(recAnchor, uint64(1), uint64(1), st.anchor.offset, st.anchor.config)
	return l.rep.state.sync()
}

// Group is the Raft group the log is replicated by.
func (l *RaftLog) Group() *raft.Group { return l.group }

// Append proposes batches to the group on its leader (see Log.Append):
// they get the offsets after everything proposed before, the term as
// their leader epoch, and are readable once committed. On a follower it
// is a *NotLeaderError.
func (l *RaftLog) Append(batches []byte, opt AppendOptions) (Appended, error) {
	if l.closed.Load() {
		return Appended{}, ErrClosed
	}
	heads, err := splitHeaders(batches)
	if err != nil {
		return Appended{}, err
	}
	res := Appended{LogAppendTime: -1}
	if opt.LogAppendTime > 0 {
		for _, h := range heads {
			record.SetLogAppendTime(batches[h.pos:h.pos+h.size], opt.LogAppendTime)
		}
		res.LogAppendTime = opt.LogAppendTime
	}

	l.proposeMu.Lock()
	defer l.proposeMu.Unlock()
	s := l.group.Status()
	if !s.Leading() {
		return Appended{}, &NotLeaderError{Leader: s.Leader}
	}
	base := l.rep.endOffset() // in a new term: everything before its proposals is written (Status.Ready)
	if le := l.leaderEnd.Load(); le != nil && le.term == s.Term {
		base = le.offset
	}
	ents := make([]*pb.Entry, len(heads))
	next := base
	for i, h := range heads {
		b := batches[h.pos : h.pos+h.size : h.pos+h.size]
		record.SetBaseOffset(b, next)
		record.SetPartitionLeaderEpoch(b, int32(s.Term))
		ents[i] = &pb.Entry{Data: b}
		next += h.count
	}
	// The entries alias batches, which the caller may use again once
	// Append returns: etcd raft copies what it is proposed, so no copy is
	// made here (TestRaftLogAppendKeepsNoHoldOnItsInput).
	if err := l.group.Propose(s.Term, ents); err != nil {
		if errors.Is(err, raft.ErrNotLeader) {
			return Appended{}, &NotLeaderError{Leader: l.group.Status().Leader}
		}
		if errors.Is(err, raft.ErrRemoved) {
			return Appended{}, ErrClosed
		}
		return Appended{}, fmt.Errorf("%w: %v", ErrAppendRefused, err)
	}
	res.BaseOffset, res.LastOffset = base, next-1
	l.leaderEnd.Store(&termOffset{term: s.Term, offset: next})
	res.Commit = Commit{log: l, upTo: next, cuts: int(s.Term)}
	if l.fsync.waitsForCommit(opt.AckCommitted) {
		res.Ack = res.Commit
	}
	return res, nil
}

// batchHead is where a batch lies in an append and how many offsets it
// takes.
type batchHead struct {
	pos, size int
	count     int64
}

// splitHeaders finds the batches of an append.
func splitHeaders(b []byte) ([]batchHead, error) {
	if len(b) == 0 {
		return nil, errors.New("replica: nothing to append")
	}
	var heads []batchHead
	for pos := 0; pos < len(b); {
		h, err := record.ParseHeader(b[pos:])
		if err != nil {
			return nil, fmt.Errorf("replica: batch at byte %d of the append: %w", pos, err)
		}
		heads = append(heads, batchHead{pos: pos, size: h.Size(), count: int64(h.LastOffsetDelta) + 1})
		pos += h.Size()
	}
	return heads, nil
}

// AckFor is the Commit an acknowledgement of the offsets below upTo waits
// for under the fsync policy.
func (l *RaftLog) AckFor(committed bool, upTo int64) Commit {
	if !l.fsync.waitsForCommit(committed) {
		return Commit{}
	}
	return l.Commit(upTo)
}

// Commit is the commit waiter of the offsets below upTo as the log holds
// them now: it completes once the high watermark passes them, if they are
// then still the batches of the term they were written in.
func (l *RaftLog) Commit(upTo int64) Commit {
	if upTo <= l.StartOffset() {
		return Commit{log: l, upTo: upTo}
	}
	term, _ := l.termAt(upTo - 1)
	return Commit{log: l, upTo: upTo, cuts: int(term)}
}

// termAt is the term of the batch holding offset: the epoch of a written
// batch, the leader's term for one it proposed.
func (l *RaftLog) termAt(offset int64) (uint64, error) {
	if offset >= l.rep.local.EndOffset() && offset < l.EndOffset() {
		return l.status.Load().Term, nil
	}
	e, err := l.rep.local.EpochAt(offset)
	return uint64(max(e, 0)), err
}

// waitCommitted waits for the offsets below upTo, written in term, to be
// below the high watermark: fsynced by a majority (on the leader, which
// may be before its own fsync ends), or applied here.
// A commit this replica proposed as leader fails as soon as it stops
// leading that term: whether the entries survive the change is unknown.
func (l *RaftLog) waitCommitted(ctx context.Context, upTo int64, cuts int) error {
	term := uint64(cuts)
	for {
		changed := l.changedChan()
		if l.closed.Load() {
			return ErrClosed
		}
		if l.rep.hw.Load() >= upTo {
			return l.checkTerm(upTo, term)
		}
		s := l.status.Load()
		if term != 0 && l.ledTerm.Load() == term && (s.Term != term || !s.Leading()) {
			return fmt.Errorf("%w: offsets below %d were not committed before leadership of term %d ended",
				&NotLeaderError{Leader: s.Leader}, upTo, term)
		}
		if upTo > l.EndOffset() {
			return fmt.Errorf("%w: offsets up to %d, the log ends at %d", ErrTruncated, upTo, l.EndOffset())
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// checkTerm succeeds if the committed batch holding upTo-1 is of term (a
// term of 0 asks nothing), and fails with ErrTruncated if another
// leader's batch took its place.
func (l *RaftLog) checkTerm(upTo int64, term uint64) error {
	if term == 0 {
		return nil
	}
	got, err := l.rep.local.EpochAt(upTo - 1)
	if err != nil {
		return nil // below the log start now: deleted after it was committed
	}
	if uint64(got) != term {
		return fmt.Errorf("%w: offsets below %d were written in term %d, the committed log has term %d there",
			ErrTruncated, upTo, term, got)
	}
	return nil
}

// Sync waits until everything appended so far is committed.
func (l *RaftLog) Sync() error {
	if l.closed.Load() {
		return ErrClosed
	}
	return l.Commit(l.EndOffset()).Wait(context.Background())
}

// AppendAt is not for a Raft log: Raft writes its followers.
func (l *RaftLog) AppendAt([]byte, int32) (Appended, error) { return Appended{}, ErrReplicated }

// TruncateTo is not for a Raft log: Raft cuts its followers' divergent
// suffixes itself.
func (l *RaftLog) TruncateTo(int64) error { return ErrReplicated }

// StartOffset is the first offset that can be read.
func (l *RaftLog) StartOffset() int64 { return l.rep.local.StartOffset() }

// HighWatermark is the commit index as an offset: the offset after the
// last entry applied here or, on the leader, after the last one it knows
// committed (fsynced by a majority, which need not include itself yet).
func (l *RaftLog) HighWatermark() int64 { return l.rep.hw.Load() }

// EndOffset is the offset the next append gets: on the leader, after
// everything it proposed; elsewhere after everything written.
func (l *RaftLog) EndOffset() int64 {
	if s, le := l.status.Load(), l.leaderEnd.Load(); le != nil && s.Leading() && s.Term == le.term {
		return le.offset
	}
	return l.rep.endOffset()
}

// Read returns whole batches from the one holding offset, all below the
// high watermark.
func (l *RaftLog) Read(offset, maxBytes int64) (*Slice, error) {
	return l.ReadBelow(offset, maxBytes, l.HighWatermark())
}

// ReadBelow is Read without the batches from limit on.
func (l *RaftLog) ReadBelow(offset, maxBytes, limit int64) (*Slice, error) {
	hw := l.HighWatermark()
	if l.closed.Load() {
		return nil, ErrClosed
	}
	if offset < l.StartOffset() || offset > hw {
		return nil, ErrOffsetOutOfRange
	}
	if offset == hw {
		return &Slice{}, nil
	}
	return l.rep.local.ReadBelow(offset, maxBytes, min(limit, hw))
}

// EpochAt is the leader epoch (term) of the batch holding offset.
func (l *RaftLog) EpochAt(offset int64) (int32, error) {
	if offset < l.StartOffset() || offset >= l.EndOffset() {
		return 0, ErrOffsetOutOfRange
	}
	t, err := l.termAt(offset)
	return int32(t), err
}

// Epochs is the epoch index of the records written here.
func (l *RaftLog) Epochs() []EpochStart { return l.rep.local.Epochs() }

// Size is the bytes the log's segments hold.
func (l *RaftLog) Size() int64 { return l.rep.local.Size() }

// OffsetForTime returns the first committed record whose timestamp is at
// least ts.
func (l *RaftLog) OffsetForTime(ts int64) (int64, int64, bool, error) {
	off, t, found, err := l.rep.local.OffsetForTime(ts)
	if found && off >= l.HighWatermark() {
		return 0, 0, false, err
	}
	return off, t, found, err
}

// MaxTimestamp returns the record with the largest timestamp.
func (l *RaftLog) MaxTimestamp() (int64, int64) { return l.rep.local.MaxTimestamp() }

// DeleteBefore moves this replica's log start offset to offset, at most
// the high watermark; the index gives up the entries below it, so a
// follower that needs them catches up from a snapshot.
func (l *RaftLog) DeleteBefore(offset int64) (int64, error) {
	if offset > l.HighWatermark() {
		return l.StartOffset(), ErrOffsetOutOfRange
	}
	limit, err := l.rep.releaseBelow(offset)
	if err != nil {
		return l.StartOffset(), err
	}
	if err := l.rep.Sync(); err != nil { // the new anchor first: see ApplyRetention
		return l.StartOffset(), err
	}
	return l.rep.local.DeleteBefore(min(offset, limit))
}

// ApplyRetention deletes the closed segments retention no longer keeps,
// none holding entries the index still keeps (so none above the high
// watermark). The anchor they lie below is made durable first: after a
// crash, a log starting past the anchor in the state file could not be
// walked (raftrecover.go).
func (l *RaftLog) ApplyRetention(now time.Time) (int, error) {
	from := l.rep.retainedFrom()
	if err := l.rep.Sync(); err != nil {
		return 0, err
	}
	return l.rep.local.log.ApplyRetentionBelow(now, from)
}

// Compact runs one compaction pass over this replica's log, as Kafka
// compacts every replica by itself. The invariant that keeps Raft correct:
//
//	compaction rewrites only closed segments wholly below the anchor's
//	offset, the anchor being durable in the state file first.
//
// Below the anchor Raft reads no entry (Entries and Term end there) and
// recovery walks none (raftrecover.go starts at the durable anchor), so
// batches there may be thinned, split or dropped; a follower that needs
// entries below the anchor gets a snapshot, which ships the batches as
// they lie now, gaps and all (raftsnapshot.go). The anchor is at most the
// last entry applied, so only committed records are compacted, never
// any above the high watermark, and none a new leader could cut.
//
// The anchor otherwise moves only as entries are applied (a window
// behind), which would leave an idle log's last entries uncompactable for
// ever: so the pass first moves it up to the active segment, which no
// pass compacts anyway, giving up the index of the closed segments'
// entries. A follower lagging into them catches up from a snapshot.
func (l *RaftLog) Compact(ctx context.Context, now time.Time) (CompactStats, error) {
	return l.CompactRetaining(ctx, now, math.MaxInt64, nil)
}

// CompactRetaining is Compact with retain, if not nil, deciding what
// stays, and no segment holding offsets at or past limit rewritten: the
// broker's metadata log compacts only what its reader has applied.
func (l *RaftLog) CompactRetaining(ctx context.Context, now time.Time, limit int64, retain Retainer) (CompactStats, error) {
	if !l.compacted.Load() {
		return CompactStats{}, nil // the index stays: no pass would use the room
	}
	if _, err := l.rep.releaseBelow(l.rep.local.log.ActiveBase()); err != nil {
		return CompactStats{}, err
	}
	limit = min(limit, l.rep.retainedFrom())
	if err := l.rep.Sync(); err != nil { // the anchor durable before anything below it changes
		return CompactStats{}, err
	}
	return l.rep.local.log.CompactRetaining(ctx, now, limit, retain)
}

// Installs counts the snapshot installs of this replica since it opened
// (recovery finishing one counts), twice each: at its start, after which
// the count is odd until it ends. A reader that applies the log as it
// grows learns from a change that the log was replaced; what it read
// while the count was odd, or changed, may be of either log.
func (l *RaftLog) Installs() uint64 { return l.rep.installs.Load() }

// Swaps counts the compacted groups its passes swapped into the log since
// it opened (seglog.Log.Swaps): a reader of the whole log in several
// reads compares it before and after, to know it read one version.
func (l *RaftLog) Swaps() uint64 { return l.rep.local.log.Swaps() }

// WholeSnapshots reports whether the replica was opened with
// RaftOptions.WholeSnapshots.
func (l *RaftLog) WholeSnapshots() bool { return l.rep.whole }

// Scrub verifies this replica's log.
func (l *RaftLog) Scrub(ctx context.Context, opt ScrubOptions) (ScrubStats, error) {
	return l.rep.local.Scrub(ctx, opt)
}

// Corruption is the damage Scrub found, or nil.
func (l *RaftLog) Corruption() error { return l.rep.local.Corruption() }

// SetConfig replaces the log's settings.
func (l *RaftLog) SetConfig(cfg Config) {
	l.compacted.Store(cfg.Compact)
	l.rep.local.SetConfig(cfg)
}

// Dir is the log's directory (the segmented log is in its logDir).
func (l *RaftLog) Dir() string { return l.dir }

// Close stops hosting the group and closes the log; pending commits fail
// with ErrClosed.
func (l *RaftLog) Close() error {
	err := l.close()
	l.release()
	return err
}

// close closes the log, leaving its directory reserved.
func (l *RaftLog) close() error {
	if !l.closed.CompareAndSwap(false, true) {
		return nil
	}
	l.host.RemoveGroup(l.group.ID())
	l.broadcast()
	return l.rep.close()
}

// Delete closes the log and removes its directory, which no other Raft
// log of this process opens before it is gone.
func (l *RaftLog) Delete() error {
	err := l.close()
	if rerr := os.RemoveAll(l.dir); err == nil {
		err = rerr
	}
	l.release()
	return err
}

// stateChanged hears the group's new state from the host.
func (l *RaftLog) stateChanged(s raft.Status) {
	l.status.Store(&s)
	if s.Leading() {
		l.ledTerm.Store(s.Term)
	}
	l.broadcast()
	if l.notify != nil {
		l.notify(s)
	}
}

// advanced hears that the high watermark moved.
func (l *RaftLog) advanced() { l.broadcast() }

// changedChan is the channel the next change closes.
func (l *RaftLog) changedChan() chan struct{} {
	l.changedMu.Lock()
	defer l.changedMu.Unlock()
	return l.changed
}

func (l *RaftLog) broadcast() {
	l.changedMu.Lock()
	close(l.changed)
	l.changed = make(chan struct{})
	l.changedMu.Unlock()
}
