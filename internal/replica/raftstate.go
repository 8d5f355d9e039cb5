package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// The Raft state file (raftStateFile in a Raft log's directory): what a
// Raft replica keeps beside its segmented log. It is append-only; each
// record is
//
//	uint32 body length, uint32 CRC-32C of the body, body: a type byte, then uvarints and length-prefixed bytes
//
// and replaying the records in order gives the state:
//
//	hard state    term, vote, commit            Raft's vote; the commit index only as a hint
//	anchor        index, term, offset, config   the entry below the first one kept (etcd raft's
//	                                            snapshot point): its index and term, the offset
//	                                            after it, the membership as of it
//	entry         index, term, offset, type, data
//	                                            an entry that carries no records: a new leader's
//	                                            empty entry or a membership change, at its index,
//	                                            sitting before the record offset given
//	truncate      index                         the entries from index on are gone
//	config        index, config                 the membership after applying the entry at index
//	install       index, term, from, end, reset, config
//	                                            a snapshot being installed (raftsnapshot.go)
//
// Entries that carry records are not here: they are the batches of the
// log, and the records here say where the others fall between them
// (raftrecover.go). The file is rewritten whole (temp file, fsync,
// rename, directory fsync) when it has grown past stateRewriteBytes.
//
// A record that fails its CRC (or is cut short) is a torn tail if no
// valid record follows it: the file is cut there. If one does, the file
// is corrupt and the replica does not start: a vote forgotten could let
// it vote twice in a term.

const (
	raftStateFile     = "raft-state"
	stateRewriteBytes = 1 << 20
)

type recordType byte

const (
	recHardState recordType = iota + 1
	recAnchor
	recEntry
	recTruncate
	recConfig
	recInstall
)

var stateCRC = crc32.MakeTable(crc32.Castagnoli)

// stateSyncHook, if set, hears of every successful fsync of a state file
// and the size it made durable, as seglog's SetSyncHook does of segments:
// for tests that cut files back to what a power cut would leave.
var stateSyncHook atomic.Pointer[func(path string, size int64)]

func reportStateSync(path string, size int64) {
	if fn := stateSyncHook.Load(); fn != nil {
		(*fn)(path, size)
	}
}

// hardState is Raft's hard state.
type hardState struct{ term, vote, commit uint64 }

// anchor is the entry just below the first one a replica keeps.
type anchor struct {
	index, term uint64
	offset      int64 // the offset after it: where the next entry's records go
	config      *pb.ConfState
}

// sideEntry is an entry that carries no records.
type sideEntry struct {
	offset int64 // the offset of the next record after it
	entry  *pb.Entry
}

// installing is a snapshot install in progress: the log keeps what lies
// below from, then takes the staged data [from, end) (after emptying it
// and starting at from if reset).
type installing struct {
	index, term uint64
	from, end   int64
	reset       bool
	config      *pb.ConfState
}

// raftState is what the state file holds, replayed.
type raftState struct {
	hard        hardState
	anchor      anchor
	entries     []sideEntry // ascending index, above the anchor
	config      *pb.ConfState
	configIndex uint64
	install     *installing
}

// stateFile is the open state file: records are buffered by add, written
// by flush, made durable by sync. A sync does not hold mu across its
// fsync: the host's loop writes (flush) while a sync round fsyncs.
type stateFile struct {
	path string

	syncMu  sync.Mutex // held across an fsync, and by whatever replaces or closes f; taken before mu
	mu      sync.Mutex // guards everything below
	f       *os.File
	size    int64 // bytes in the file
	buf     []byte
	written bool   // bytes written since the last sync
	added   uint64 // records added since the file was opened, numbered from 1
	durable uint64 // the last of them made durable, by a sync or a rewrite
	closed  bool
}

// openStateFile opens (creating it if missing) the state file in dir and
// replays it. A torn tail is cut off; damage before the end is an error.
func openStateFile(dir string) (*stateFile, *raftState, error) {
	path := filepath.Join(dir, raftStateFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, err
	}
	sf := &stateFile{path: path, f: f}
	st, err := sf.load()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return sf, st, nil
}

// load replays the file, cutting a torn tail.
func (sf *stateFile) load() (*raftState, error) {
	b, err := io.ReadAll(io.NewSectionReader(sf.f, 0, 1<<62))
	if err != nil {
		return nil, err
	}
	st := &raftState{}
	pos := 0
	for pos < len(b) {
		body, n, ok := parseStateRecord(b[pos:])
		if !ok {
			break
		}
		if err := st.apply(body); err != nil {
			return nil, fmt.Errorf("replica: %s at byte %d: %w", sf.path, pos, err)
		}
		pos += n
	}
	if pos < len(b) {
		if at, found := validRecordAfter(b, pos+1); found {
			return nil, &CorruptionError{File: sf.path, Pos: int64(pos),
				Err: fmt.Errorf("damaged record before a valid one at byte %d", at)}
		}
		if err := sf.f.Truncate(int64(pos)); err != nil {
			return nil, err
		}
		if err := sf.f.Sync(); err != nil {
			return nil, err
		}
		reportStateSync(sf.path, int64(pos))
	}
	sf.size = int64(pos)
	return st, nil
}

// parseStateRecord returns the body of the record at the start of b and
// its whole length, ok false if there is no valid record there.
func parseStateRecord(b []byte) (body []byte, n int, ok bool) {
	if len(b) < 8 {
		return nil, 0, false
	}
	size := binary.BigEndian.Uint32(b)
	if size == 0 || uint64(size) > uint64(len(b)-8) {
		return nil, 0, false
	}
	body = b[8 : 8+size]
	if crc32.Checksum(body, stateCRC) != binary.BigEndian.Uint32(b[4:]) {
		return nil, 0, false
	}
	return body, 8 + int(size), true
}

// validRecordAfter reports whether a valid record starts anywhere at or
// after from, and where.
func validRecordAfter(b []byte, from int) (int, bool) {
	for at := from; at+8 < len(b); at++ {
		if body, _, ok := parseStateRecord(b[at:]); ok && decodeable(body) {
			return at, true
		}
	}
	return 0, false
}

func decodeable(body []byte) bool { return (&raftState{}).apply(body) == nil }

// apply replays one record.
func (st *raftState) apply(body []byte) error {
	d := stateDecoder{b: body[1:]}
	switch recordType(body[0]) {
	case recHardState:
		st.hard = hardState{term: d.uvarint(), vote: d.uvarint(), commit: d.uvarint()}
	case recAnchor:
		a := anchor{index: d.uvarint(), term: d.uvarint(), offset: int64(d.uvarint())}
		a.config = d.config()
		if d.err == nil {
			st.setAnchor(a)
		}
	case recEntry:
		index, term, offset := d.uvarint(), d.uvarint(), int64(d.uvarint())
		typ := pb.EntryType(d.uvarint())
		data := d.bytes()
		if d.err == nil {
			st.truncate(index)
			st.entries = append(st.entries, sideEntry{offset: offset, entry: &pb.Entry{
				Index: new(index), Term: new(term), Type: typ.Enum(), Data: data,
			}})
		}
	case recTruncate:
		st.truncate(d.uvarint())
	case recConfig:
		index := d.uvarint()
		cs := d.config()
		if d.err == nil {
			st.config, st.configIndex = cs, index
		}
	case recInstall:
		in := &installing{index: d.uvarint(), term: d.uvarint(), from: int64(d.uvarint()), end: int64(d.uvarint()), reset: d.uvarint() == 1}
		in.config = d.config()
		if d.err == nil {
			st.install = in
		}
	default:
		return fmt.Errorf("unknown record type %d", body[0])
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%d bytes after the record", len(d.b))
	}
	return d.err
}

// setAnchor moves the anchor to a: entries at or below it go, and so does
// an install it completes.
func (st *raftState) setAnchor(a anchor) {
	st.anchor = a
	i := 0
	for i < len(st.entries) && st.entries[i].entry.GetIndex() <= a.index {
		i++
	}
	st.entries = st.entries[i:]
	if st.configIndex <= a.index {
		st.config, st.configIndex = a.config, a.index
	}
	st.install = nil
}

// truncate drops the entries from index on.
func (st *raftState) truncate(index uint64) {
	for len(st.entries) > 0 && st.entries[len(st.entries)-1].entry.GetIndex() >= index {
		st.entries = st.entries[:len(st.entries)-1]
	}
}

// add buffers a record, flush writes it; it returns the record's number,
// which isDurable takes.
func (sf *stateFile) add(typ recordType, fields ...any) uint64 {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	sf.buf = appendStateRecord(sf.buf, typ, fields...)
	sf.added++
	return sf.added
}

// isDurable reports whether record n (add's number) is durable: a sync
// that began after it was added has ended, or a rewrite has.
func (sf *stateFile) isDurable(n uint64) bool {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	return n <= sf.durable
}

// appendStateRecord encodes a record: uint64 and int64 fields as
// uvarints, []byte fields and configurations length-prefixed.
func appendStateRecord(dst []byte, typ recordType, fields ...any) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0, byte(typ))
	for _, f := range fields {
		switch v := f.(type) {
		case uint64:
			dst = binary.AppendUvarint(dst, v)
		case int64:
			dst = binary.AppendUvarint(dst, uint64(v))
		case bool:
			dst = binary.AppendUvarint(dst, map[bool]uint64{false: 0, true: 1}[v])
		case []byte:
			dst = binary.AppendUvarint(dst, uint64(len(v)))
			dst = append(dst, v...)
		case *pb.ConfState:
			b, err := proto.Marshal(v)
			if err != nil {
				panic(err) // a ConfState always marshals
			}
			dst = binary.AppendUvarint(dst, uint64(len(b)))
			dst = append(dst, b...)
		default:
			panic(fmt.Sprintf("replica: state record field of type %T", f))
		}
	}
	body := dst[start+8:]
	binary.BigEndian.PutUint32(dst[start:], uint32(len(body)))
	binary.BigEndian.PutUint32(dst[start+4:], crc32.Checksum(body, stateCRC))
	return dst
}

// flush writes the buffered records with one write.
func (sf *stateFile) flush() error {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	return sf.flushLocked()
}

func (sf *stateFile) flushLocked() error {
	if len(sf.buf) == 0 {
		return nil
	}
	if sf.closed {
		return ErrClosed
	}
	if _, err := sf.f.WriteAt(sf.buf, sf.size); err != nil {
		// Cut what may have reached the file: a later write must not
		// land after half a record.
		if terr := sf.f.Truncate(sf.size); terr != nil {
			return fmt.Errorf("replica: write %s: %w; cutting the partial write failed: %v", sf.path, err, terr)
		}
		return fmt.Errorf("replica: write %s: %w", sf.path, err)
	}
	sf.size += int64(len(sf.buf))
	sf.buf = sf.buf[:0]
	sf.written = true
	return nil
}

// sync writes the buffered records and fsyncs the file if anything was
// written since the last sync.
func (sf *stateFile) sync() error {
	sf.syncMu.Lock()
	defer sf.syncMu.Unlock()
	sf.mu.Lock()
	if err := sf.flushLocked(); err != nil || !sf.written {
		sf.mu.Unlock()
		return err
	}
	f, size, added := sf.f, sf.size, sf.added
	sf.written = false // a flush during the fsync sets it again
	sf.mu.Unlock()
	if err := f.Sync(); err != nil {
		sf.mu.Lock()
		sf.written = true
		sf.mu.Unlock()
		return fmt.Errorf("replica: fsync %s: %w", sf.path, err)
	}
	sf.mu.Lock()
	sf.durable = max(sf.durable, added)
	sf.mu.Unlock()
	reportStateSync(sf.path, size)
	return nil
}

// oversized reports whether the file should be rewritten.
func (sf *stateFile) oversized() bool {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	return sf.size > stateRewriteBytes
}

// rewrite replaces the file by one holding just st, durably.
func (sf *stateFile) rewrite(st *raftState) error {
	sf.syncMu.Lock()
	defer sf.syncMu.Unlock()
	sf.mu.Lock()
	defer sf.mu.Unlock()
	if sf.closed {
		return ErrClosed
	}
	b := st.encode()
	tmp := sf.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = os.Rename(tmp, sf.path)
	}
	if err == nil {
		err = syncDirectory(filepath.Dir(sf.path))
	}
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("replica: rewrite %s: %w", sf.path, err)
	}
	sf.f.Close()
	sf.f, sf.size, sf.buf, sf.written, sf.durable = f, int64(len(b)), sf.buf[:0], false, sf.added
	reportStateSync(sf.path, sf.size)
	return nil
}

// encode renders st as the records that replay to it.
func (st *raftState) encode() []byte {
	a := st.anchor
	b := appendStateRecord(nil, recHardState, st.hard.term, st.hard.vote, st.hard.commit)
	b = appendStateRecord(b, recAnchor, a.index, a.term, a.offset, ensureConfig(a.config))
	for _, e := range st.entries {
		b = appendEntryRecord(b, e)
	}
	if st.configIndex > a.index {
		b = appendStateRecord(b, recConfig, st.configIndex, ensureConfig(st.config))
	}
	if in := st.install; in != nil {
		b = appendStateRecord(b, recInstall, in.index, in.term, in.from, in.end, in.reset, ensureConfig(in.config))
	}
	return b
}

func appendEntryRecord(dst []byte, e sideEntry) []byte {
	return appendStateRecord(dst, recEntry, e.entry.GetIndex(), e.entry.GetTerm(), e.offset,
		uint64(e.entry.GetType()), e.entry.GetData())
}

func ensureConfig(cs *pb.ConfState) *pb.ConfState {
	if cs == nil {
		return &pb.ConfState{}
	}
	return cs
}

// close closes the file, writing (not syncing) what is buffered.
func (sf *stateFile) close() error {
	sf.syncMu.Lock()
	defer sf.syncMu.Unlock()
	sf.mu.Lock()
	defer sf.mu.Unlock()
	if sf.closed {
		return nil
	}
	err := sf.flushLocked()
	if serr := sf.f.Sync(); err == nil {
		err = serr
	}
	if cerr := sf.f.Close(); err == nil {
		err = cerr
	}
	sf.closed = true
	return err
}

// stateDecoder reads a record body, keeping the first error.
type stateDecoder struct {
	b   []byte
	err error
}

var errShortRecord = errors.New("record cut short")

func (d *stateDecoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errShortRecord
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *stateDecoder) bytes() []byte {
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.b)) {
		d.err = errShortRecord
	}
	if d.err != nil {
		return nil
	}
	b := append([]byte(nil), d.b[:n]...)
	d.b = d.b[n:]
	return b
}

func (d *stateDecoder) config() *pb.ConfState {
	b := d.bytes()
	if d.err != nil {
		return nil
	}
	cs := &pb.ConfState{}
	if err := proto.Unmarshal(b, cs); err != nil {
		d.err = err
		return nil
	}
	return cs
}

// syncDirectory fsyncs dir, making renames and creations in it durable.
func syncDirectory(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
