//go:build linux

package seglog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/wharf-mq/wharf/internal/record"
)

// Direct writes (direct.go) are Linux only; elsewhere the log writes
// through the page cache, which the other tests cover.

// tmpfsMagic is statfs's f_type of a tmpfs.
const tmpfsMagic = 0x01021994

// directDir returns an empty directory on a disk-backed file system, where
// O_DIRECT writes really go past the page cache: t.TempDir() when it is one
// (/tmp is ext4 on the machines these tests were written on), else a
// directory under /var/tmp. A tmpfs accepts O_DIRECT (Linux 6.6 on) but
// writes into its page cache all the same, so it would prove nothing.
func directDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if !onTmpfs(t, dir) {
		return dir
	}
	dir, err := os.MkdirTemp("/var/tmp", "seglog-direct-")
	if err != nil {
		t.Skipf("no disk-backed directory for direct writes: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if onTmpfs(t, dir) {
		t.Skip("no disk-backed directory for direct writes: /tmp and /var/tmp are tmpfs")
	}
	return dir
}

func onTmpfs(t *testing.T, dir string) bool {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return st.Type == tmpfsMagic
}

// openDirectLog opens a log in dir that writes direct.
func openDirectLog(t *testing.T, dir string, cfg Config) *Log {
	t.Helper()
	l := mustOpen(t, dir, cfg)
	l.WriteDirect(true)
	return l
}

// requireDirect fails the test unless the active segment's last write went
// through its O_DIRECT descriptor (only a direct write leaves the tail
// known): a test whose writes quietly fell back to the page cache would
// prove nothing. The descriptor itself may be closed already: the package's
// tests run with a file limit of 3 (handles_test.go).
func requireDirect(t *testing.T, l *Log) {
	t.Helper()
	l.mu.RLock()
	defer l.mu.RUnlock()
	seg := l.activeLocked()
	if seg.directRefused != nil || !seg.tailKnown {
		t.Fatalf("the active segment was not written direct (refused %v)", seg.directRefused)
	}
}

// directOf returns the segment's O_DIRECT descriptor, nil if it has none.
func directOf(seg *segment) *os.File {
	seg.file.cache.mu.Lock()
	defer seg.file.cache.mu.Unlock()
	return seg.file.direct
}

// sizedBatch returns a batch of one record exactly size bytes long (size
// at least 80), its value filled with a byte that depends on seed.
func sizedBatch(t *testing.T, size int, seed int64) []byte {
	t.Helper()
	fill := byte(seed*7 + 1)
	// A length's varint grows a byte at 64, 8192, ... bytes, which one
	// record may jump over; a second record with an empty value then
	// takes up the difference.
	for _, extra := range [][]record.Record{nil, {{}}} {
		v := size - record.HeaderSize
		for range 8 {
			recs := append([]record.Record{{Value: bytes.Repeat([]byte{fill}, max(v, 1))}}, extra...)
			b := record.NewBatch(seed, recs)
			if len(b) == size {
				return b
			}
			v += size - len(b)
		}
	}
	t.Fatalf("no batch of %d bytes", size)
	return nil
}

// directLog is a log under test with what it should hold: every batch
// appended, as the log stamped it.
type directLog struct {
	t    *testing.T
	dir  string
	cfg  Config
	l    *Log
	want [][]byte
}

func newDirectLog(t *testing.T, cfg Config) *directLog {
	dir := directDir(t)
	return &directLog{t: t, dir: dir, cfg: cfg, l: openDirectLog(t, dir, cfg)}
}

// add appends the batches (one Append) and reads the last one back at
// once: its block was just rewritten past the page cache, which must hold
// nothing stale of it.
func (d *directLog) add(batches ...[]byte) {
	d.t.Helper()
	records := bytes.Join(batches, nil)
	if _, err := d.l.Append(records, AppendOptions{}); err != nil {
		d.t.Fatalf("Append: %v", err)
	}
	for _, b := range batches { // as the log stamped them, in records
		d.want = append(d.want, records[:len(b):len(b)])
		records = records[len(b):]
	}
	d.checkLast()
}

// addParts appends the batches as AppendAtVerified does a Raft follower's
// entries: one part each, written in one go.
func (d *directLog) addParts(batches ...[]byte) {
	d.t.Helper()
	off := d.l.EndOffset()
	for _, b := range batches {
		record.SetBaseOffset(b, off)
		h, _ := record.ParseHeader(b)
		off = h.LastOffset() + 1
	}
	if _, err := d.l.AppendAtVerified(0, batches...); err != nil {
		d.t.Fatalf("AppendAtVerified: %v", err)
	}
	d.want = append(d.want, batches...) // as the log stamped them
	d.checkLast()
}

func (d *directLog) checkLast() {
	d.t.Helper()
	last := d.want[len(d.want)-1]
	h, _ := record.ParseHeader(last)
	s, err := d.l.Read(h.BaseOffset, 1)
	if err != nil {
		d.t.Fatalf("Read(%d): %v", h.BaseOffset, err)
	}
	b, err := s.Bytes()
	s.Release()
	if err != nil || !bytes.Equal(b, last) {
		d.t.Fatalf("batch %d reads back wrong (%d bytes, want %d; %v)", h.BaseOffset, len(b), len(last), err)
	}
}

// check reads the whole log and compares it with what was appended.
func (d *directLog) check() {
	d.t.Helper()
	got := d.readLog()
	if want := bytes.Join(d.want, nil); !bytes.Equal(got, want) {
		d.t.Fatalf("the log reads %d bytes that differ from the %d appended (first difference at %d)", len(got), len(want), firstDifference(got, want))
	}
}

// readLog reads the whole log, every batch of which must verify.
func (d *directLog) readLog() []byte {
	d.t.Helper()
	var got []byte
	for next := d.l.StartOffset(); next < d.l.EndOffset(); {
		s, err := d.l.Read(next, 1<<20)
		if err != nil {
			d.t.Fatalf("Read(%d): %v", next, err)
		}
		b, err := s.Bytes()
		s.Release()
		if err != nil {
			d.t.Fatalf("Bytes: %v", err)
		}
		for p := b; len(p) > 0; {
			h, err := record.Verify(p)
			if err != nil {
				d.t.Fatalf("batch at offset %d: %v", next, err)
			}
			next = h.LastOffset() + 1
			p = p[h.Size():]
		}
		got = append(got, b...)
	}
	return got
}

// checkFiles compares the segment files, read from the disk rather than
// the page cache, with what was appended: after a clean Close they hold
// the batches and nothing else.
func (d *directLog) checkFiles() {
	d.t.Helper()
	var got []byte
	for _, path := range segmentFiles(d.t, d.dir) {
		f, err := os.Open(path)
		if err != nil {
			d.t.Fatal(err)
		}
		_ = dropPages(f, 0, 0) // read what the disk holds
		b, err := os.ReadFile(path)
		f.Close()
		if err != nil {
			d.t.Fatal(err)
		}
		got = append(got, b...)
	}
	if want := bytes.Join(d.want, nil); !bytes.Equal(got, want) {
		d.t.Fatalf("the segment files hold %d bytes that differ from the %d appended (first difference at %d)", len(got), len(want), firstDifference(got, want))
	}
}

func firstDifference(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// reopen closes the log cleanly, checks its files and opens it again.
func (d *directLog) reopen() {
	d.t.Helper()
	if err := d.l.Close(); err != nil {
		d.t.Fatalf("Close: %v", err)
	}
	d.checkFiles()
	d.l = openDirectLog(d.t, d.dir, d.cfg)
	d.check()
}

// crashReopen drops the log as a killed process would (the direct writes'
// zero padding stays in the file) and opens it again: recovery must read
// the padding as the end of the log.
func (d *directLog) crashReopen() {
	d.t.Helper()
	d.l.crash()
	d.l = openDirectLog(d.t, d.dir, d.cfg)
	d.check()
}

func (d *directLog) close() {
	d.t.Helper()
	if err := d.l.Close(); err != nil {
		d.t.Fatalf("Close: %v", err)
	}
}

// TestDirectManySmallAppends: appends smaller than a block, each
// rewriting the block the one before ended in, from the tail kept in
// memory; read back after each, after a crash, and after a clean reopen.
func TestDirectManySmallAppends(t *testing.T) {
	cfg := smallConfig()
	cfg.SegmentBytes = 1 << 20
	d := newDirectLog(t, cfg)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 400 {
		d.add(sizedBatch(t, 80+rng.IntN(1500), int64(i)))
	}
	requireDirect(t, d.l)
	d.check()
	d.crashReopen()
	for i := range 50 {
		d.add(sizedBatch(t, 80+rng.IntN(1500), int64(i)))
	}
	requireDirect(t, d.l)
	d.reopen()
	d.add(sizedBatch(t, 100, 1))
	requireDirect(t, d.l) // the first write after Open loads the tail from the file
	d.reopen()
	d.close()
}

// TestDirectChunkBoundaries: appends larger than one aligned buffer
// (directChunk), and appends ending exactly at a buffer's end and at a
// block boundary, through Append and through AppendAtVerified's parts.
func TestDirectChunkBoundaries(t *testing.T) {
	cfg := smallConfig()
	cfg.SegmentBytes = 64 << 20
	d := newDirectLog(t, cfg)
	d.add(sizedBatch(t, 1000, 1))
	// The 1000 bytes of the tail and this fill the buffer exactly: the
	// tail is empty after it.
	d.add(sizedBatch(t, directChunk-1000, 2))
	requireDirect(t, d.l)
	d.add(sizedBatch(t, 300, 3))
	d.add(sizedBatch(t, 2*directChunk+12345, 4)) // three buffers, the last part full
	d.add(sizedBatch(t, 100, 5), sizedBatch(t, 3*directChunk, 6), sizedBatch(t, 200, 7))
	// End exactly at a block boundary: the next write starts a new block
	// with no tail.
	d.add(sizedBatch(t, directBlock-int(d.size()%directBlock)+directBlock, 8))
	if d.size()%directBlock != 0 {
		t.Fatalf("size %d, want a block boundary", d.size())
	}
	d.add(sizedBatch(t, 500, 9))
	d.addParts(sizedBatch(t, directChunk/2, 10), sizedBatch(t, directChunk, 11), sizedBatch(t, 90, 12))
	d.addParts(sizedBatch(t, 700, 13), sizedBatch(t, directChunk-700-int(d.size()%directBlock), 14))
	requireDirect(t, d.l)
	d.check()
	d.crashReopen()
	d.add(sizedBatch(t, directChunk+1, 15))
	d.reopen()
	d.close()
}

// size is the active segment's write position.
func (d *directLog) size() int64 {
	d.l.mu.RLock()
	defer d.l.mu.RUnlock()
	return d.l.activeLocked().size
}

// TestDirectAcrossRolls: every segment starts with no tail; a closed
// segment is trimmed to its data, zero padding and all, and its O_DIRECT
// descriptor closed at the roll (under a file limit that closes none of
// the files itself).
func TestDirectAcrossRolls(t *testing.T) {
	withMaxOpenFiles(t, 1000)
	cfg := smallConfig()
	cfg.SegmentBytes = 20000
	d := newDirectLog(t, cfg)
	rng := rand.New(rand.NewPCG(3, 4))
	var rolled []*os.File
	for i := range 100 {
		before := d.activeDirect()
		d.add(sizedBatch(t, 100+rng.IntN(3000), int64(i)))
		if before != nil && before != d.activeDirect() {
			rolled = append(rolled, before)
		}
	}
	if len(rolled) < 5 {
		t.Fatalf("%d rolls seen, want several", len(rolled))
	}
	for _, f := range rolled {
		if err := f.Sync(); !errors.Is(err, os.ErrClosed) {
			t.Fatalf("a rolled segment's O_DIRECT descriptor is still open (fsync: %v)", err)
		}
	}
	files := segmentFiles(t, d.dir)
	for _, path := range files[:len(files)-1] {
		if size, end := fileSize(t, path), segmentDataEnd(t, path); size != end {
			t.Fatalf("closed segment %s holds %d bytes past its data", filepath.Base(path), size-end)
		}
	}
	d.crashReopen()
	d.add(sizedBatch(t, 4000, 1))
	d.reopen()
	d.close()
}

func (d *directLog) activeDirect() *os.File {
	d.l.mu.RLock()
	defer d.l.mu.RUnlock()
	return directOf(d.l.activeLocked())
}

// TestDirectPaddingStaysInAllocatedSpace: with segment.bytes not a
// multiple of the block, preallocation stops short of the block a full
// segment's last write pads up to. The padding must still count as
// allocated space, or the roll leaves it in the closed segment, where
// Open reads it as batches.
func TestDirectPaddingStaysInAllocatedSpace(t *testing.T) {
	cfg := smallConfig()
	cfg.SegmentBytes = 10000
	d := newDirectLog(t, cfg)
	d.add(sizedBatch(t, 5000, 1))
	d.add(sizedBatch(t, 5000, 2)) // the segment is full: 10000 bytes, padded to 12288
	requireDirect(t, d.l)
	d.add(sizedBatch(t, 5000, 3)) // rolls
	first := segmentPath(d.dir, 0, logSuffix)
	if size := fileSize(t, first); size != 10000 {
		t.Fatalf("the closed segment is %d bytes, want its 10000 bytes of data", size)
	}
	d.reopen()
	d.add(sizedBatch(t, 4000, 4))
	d.reopen()
	d.close()
}

// TestDirectAfterTruncate: a cut inside the active segment and one at a
// segment's start; direct writes go on after each, from the right tail.
func TestDirectAfterTruncate(t *testing.T) {
	cfg := smallConfig()
	cfg.SegmentBytes = 1 << 20
	d := newDirectLog(t, cfg)
	for i := range 40 {
		d.add(sizedBatch(t, 300+i*37, int64(i)))
	}
	d.truncate(d.baseOf(25))
	for i := range 10 {
		d.add(sizedBatch(t, 500+i*91, int64(i)))
	}
	requireDirect(t, d.l)
	d.check()
	d.truncate(d.activeBase()) // drops the whole active segment
	for i := range 10 {
		d.add(sizedBatch(t, 200+i*53, int64(i)))
	}
	requireDirect(t, d.l)
	d.crashReopen()
	d.truncate(d.baseOf(len(d.want) - 3))
	d.add(sizedBatch(t, 2000, 1))
	d.reopen()
	d.close()
}

// truncate cuts the log at the batch that starts at offset, and what it
// should hold with it.
func (d *directLog) truncate(offset int64) {
	d.t.Helper()
	if err := d.l.TruncateTo(offset); err != nil {
		d.t.Fatalf("TruncateTo(%d): %v", offset, err)
	}
	for i, b := range d.want {
		if h, _ := record.ParseHeader(b); h.BaseOffset == offset {
			d.want = d.want[:i]
			break
		}
	}
	d.check()
}

// baseOf is the base offset of the i-th batch appended.
func (d *directLog) baseOf(i int) int64 {
	h, _ := record.ParseHeader(d.want[i])
	return h.BaseOffset
}

func (d *directLog) activeBase() int64 {
	d.l.mu.RLock()
	defer d.l.mu.RUnlock()
	return d.l.activeLocked().base
}

// TestDirectSwitchingToAndFromBuffered: a replica turns leader and
// follower again while its segment is active. A buffered write after
// direct ones reads the block they wrote from the disk; a direct write
// after buffered ones (their pages maybe still dirty: the kernel writes
// them back before the direct write) must start from the tail as the
// buffered writes left it, not as the last direct write did.
func TestDirectSwitchingToAndFromBuffered(t *testing.T) {
	cfg := smallConfig()
	cfg.SegmentBytes = 1 << 20
	d := newDirectLog(t, cfg)
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 60 {
		d.l.WriteDirect(i/3%2 == 0) // three direct, three buffered, ...
		d.add(sizedBatch(t, 80+rng.IntN(2500), int64(i)))
		if i/3%2 == 0 {
			requireDirect(t, d.l)
		}
	}
	d.check()
	d.crashReopen()
	d.l.WriteDirect(false)
	d.add(sizedBatch(t, 333, 1))
	d.l.WriteDirect(true)
	d.add(sizedBatch(t, 444, 2))
	requireDirect(t, d.l)
	d.reopen()
	d.close()
}

// TestDirectFailedWrite: a direct write that fails is cut off again, and
// the next one writes from the right tail.
func TestDirectFailedWrite(t *testing.T) {
	cfg := smallConfig()
	cfg.SegmentBytes = 1 << 20
	d := newDirectLog(t, cfg)
	for i := range 5 {
		d.add(sizedBatch(t, 700, int64(i)))
	}
	requireDirect(t, d.l)
	// Swap the O_DIRECT descriptor for a read-only one: the write fails
	// (EBADF) as one failing for want of space would, after the log has
	// taken its tail block.
	d.l.mu.Lock()
	seg := d.l.activeLocked()
	size := seg.size
	d.l.mu.Unlock()
	ro, err := os.OpenFile(seg.logPath, os.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	good := swapDirect(seg, ro)
	if _, err := d.l.Append(sizedBatch(t, 3000, 9), AppendOptions{}); err == nil {
		t.Fatal("an append through a read-only descriptor succeeded")
	}
	if got := fileSize(t, seg.logPath); got != size {
		t.Fatalf("the segment is %d bytes after the failed write, want it cut back to %d", got, size)
	}
	swapDirect(seg, good)
	ro.Close()
	for i := range 5 {
		d.add(sizedBatch(t, 900, int64(i)))
	}
	requireDirect(t, d.l)
	d.crashReopen()
	d.reopen()
	d.close()
}

// swapDirect makes f the segment's O_DIRECT descriptor and returns the
// one it had.
func swapDirect(seg *segment, f *os.File) *os.File {
	seg.file.cache.mu.Lock()
	defer seg.file.cache.mu.Unlock()
	old := seg.file.direct
	seg.file.direct = f
	return old
}

// TestDirectRefusedWritesBuffered: where the .log file cannot be opened
// for direct writes, the log writes through the page cache, and does not
// try to open it again at every write. The open is made to fail by giving
// the file handle a path that does not exist for one append (the file is
// open already, so only the direct open uses it).
func TestDirectRefusedWritesBuffered(t *testing.T) {
	cfg := smallConfig()
	cfg.SegmentBytes = 1 << 20
	d := newDirectLog(t, cfg)
	d.l.mu.Lock()
	seg := d.l.activeLocked()
	d.l.mu.Unlock()
	h := seg.file
	h.cache.mu.Lock()
	path := h.path
	h.path = filepath.Join(d.dir, "missing", filepath.Base(path))
	h.cache.mu.Unlock()
	d.add(sizedBatch(t, 1000, 1))
	h.cache.mu.Lock()
	h.path = path
	h.cache.mu.Unlock()
	d.l.mu.Lock()
	refused := seg.directRefused != nil
	d.l.mu.Unlock()
	if direct := directOf(seg); !refused || direct != nil {
		t.Fatalf("refused %v, descriptor %v: want the direct open refused", refused, direct != nil)
	}
	d.add(sizedBatch(t, 2000, 2))
	if directOf(seg) != nil {
		t.Fatal("the log opened the file for direct writes again after a refusal")
	}
	d.reopen()
	d.add(sizedBatch(t, 3000, 3)) // the reopened segment tries again
	requireDirect(t, d.l)
	d.reopen()
	d.close()
}

// TestDirectDescriptorClosedWithTheLog: Close and Delete close the active
// segment's O_DIRECT descriptor.
func TestDirectDescriptorClosedWithTheLog(t *testing.T) {
	for _, del := range []bool{false, true} {
		d := newDirectLog(t, smallConfig())
		d.add(sizedBatch(t, 1000, 1))
		f := d.activeDirect()
		if f == nil {
			t.Fatal("no O_DIRECT descriptor after a direct write")
		}
		var err error
		if del {
			err = d.l.Delete()
		} else {
			err = d.l.Close()
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); !errors.Is(err, os.ErrClosed) {
			t.Fatalf("delete %v: the O_DIRECT descriptor is still open (fsync: %v)", del, err)
		}
	}
}

// TestDirectDescriptorsCountAgainstTheFileLimit: the O_DIRECT descriptors
// of many followers' active segments count against the file limit and are
// closed with their files, and the tail kept in memory carries the writes
// on across the close and reopen.
func TestDirectDescriptorsCountAgainstTheFileLimit(t *testing.T) {
	const logs, limit = 20, 8
	withMaxOpenFiles(t, limit)
	root := directDir(t)
	var all []*directLog
	for i := range logs {
		dir := filepath.Join(root, fmt.Sprint(i))
		d := &directLog{t: t, dir: dir, cfg: smallConfig(), l: openDirectLog(t, dir, smallConfig())}
		all = append(all, d)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for round := range 5 {
		for _, d := range all {
			d.add(sizedBatch(t, 80+rng.IntN(3000), int64(round)))
			requireDirect(t, d.l)
		}
		if err := all[0].l.Sync(); err != nil { // the others' files are fsynced as the cache closes them
			t.Fatal(err)
		}
	}
	if n := openDescriptors(t, root); n > limit {
		t.Fatalf("%d descriptors open under the logs, limit %d", n, limit)
	}
	for _, d := range all {
		d.check()
		d.reopen()
		d.close()
	}
}

// TestDirectPowerCut: a power cut after direct writes. Appends run on past
// the last fsync (a Durable append); at the cut each 4 KiB block past the
// fsynced data holds either what it held at the fsync or what was written
// since, chosen at random, as a disk with a volatile cache may leave it.
// The direct writes since the fsync must not have changed a byte of the
// fsynced data (they rewrite the block it ends in), and recovery must
// keep all of it and serve nothing corrupt: a prefix of what was appended.
// The same cut after buffered writes is the reference.
func TestDirectPowerCut(t *testing.T) {
	for _, direct := range []bool{true, false} {
		t.Run(fmt.Sprintf("direct=%v", direct), func(t *testing.T) { testPowerCut(t, direct) })
	}
}

func testPowerCut(t *testing.T, direct bool) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 9))
		cfg := smallConfig()
		cfg.SegmentBytes = 64 << 20 // one segment: the roll fsyncs the others
		d := newDirectLog(t, cfg)
		d.l.WriteDirect(direct)
		path := segmentPath(d.dir, 0, logSuffix)
		durable, durableSize := 0, int64(0) // batches and bytes the last fsync covered
		for i := range 150 {
			size := 80 + rng.IntN(6000)
			if rng.IntN(40) == 0 {
				size = directChunk + rng.IntN(directChunk)
			}
			b := sizedBatch(t, size, int64(i))
			if i%7 == 6 {
				if _, err := d.l.Append(b, AppendOptions{Durable: true}); err != nil {
					t.Fatal(err)
				}
				d.want = append(d.want, b)
				durable, durableSize = len(d.want), d.size()
				continue
			}
			d.add(b)
		}
		if direct {
			requireDirect(t, d.l)
		}
		d.l.crash()
		cut, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		// At the fsync the file held the batches up to durableSize, and
		// zeros after them (preallocated space, a direct write's padding).
		synced := bytes.Join(d.want[:durable], nil)
		if !bytes.Equal(cut[:durableSize], synced) {
			t.Fatalf("seed %d: writes after the fsync changed fsynced data (first difference at %d)", seed, firstDifference(cut, synced))
		}
		for at := durableSize &^ (directBlock - 1); at < int64(len(cut)); at += directBlock {
			if rng.IntN(2) == 0 {
				continue // the block reached the disk
			}
			end := min(at+directBlock, int64(len(cut)))
			clear(cut[max(at, durableSize):end]) // it holds what it held at the fsync
		}
		if err := os.WriteFile(path, cut, 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := Open(d.dir, cfg, testLogger(t))
		if err != nil {
			t.Fatalf("seed %d: Open after the power cut: %v", seed, err)
		}
		l.WriteDirect(direct)
		d.l = l
		if kept := d.checkPrefix(); kept < durable {
			t.Fatalf("seed %d: %d batches survive the power cut, %d were fsynced", seed, kept, durable)
		}
		d.add(sizedBatch(t, 3000, 1))
		d.reopen()
		d.close()
	}
}

// checkPrefix reads the whole log, which must hold the first batches
// appended and nothing else, makes them all it should hold, and returns
// how many there are.
func (d *directLog) checkPrefix() int {
	d.t.Helper()
	got := d.readLog()
	k, n := 0, 0
	for k < len(d.want) && n+len(d.want[k]) <= len(got) {
		n += len(d.want[k])
		k++
	}
	if want := bytes.Join(d.want[:k], nil); n != len(got) || !bytes.Equal(got, want) {
		d.t.Fatalf("the log reads %d bytes that are not the first batches appended (first difference at %d)", len(got), firstDifference(got, want))
	}
	d.want = d.want[:k]
	return k
}

// TestDirectWriteRefusedWritesBuffered: a file system that opens a file
// for O_DIRECT but refuses the writes (EINVAL, as for an alignment it does
// not take) costs the segment its direct writes, not the append. The
// refusal comes from a descriptor of /proc/self/clear_refs swapped in: it
// answers EINVAL to anything but a digit, and the segment's first byte,
// where the rewritten tail starts, is a zero (the first batch's offset).
func TestDirectWriteRefusedWritesBuffered(t *testing.T) {
	d := newDirectLog(t, smallConfig())
	d.add(sizedBatch(t, 1000, 1))
	requireDirect(t, d.l)
	einval, err := os.OpenFile("/proc/self/clear_refs", os.O_WRONLY, 0)
	if err != nil {
		t.Skip("no /proc/self/clear_refs to refuse the write:", err)
	}
	d.l.mu.Lock()
	seg := d.l.activeLocked()
	d.l.mu.Unlock()
	good := swapDirect(seg, einval)
	d.add(sizedBatch(t, 2000, 2))
	good.Close()
	d.l.mu.Lock()
	refused := seg.directRefused != nil
	d.l.mu.Unlock()
	if !refused || directOf(seg) != nil {
		t.Fatalf("refused %v, descriptor %v: want direct writes refused after EINVAL", refused, directOf(seg) != nil)
	}
	if _, err := einval.Write([]byte("x")); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("the refusing descriptor is still open (write: %v)", err)
	}
	d.add(sizedBatch(t, 500, 3))
	d.reopen()
	d.close()
}

// TestDirectPaddingIsZeros: the padding up to the block boundary is zeros,
// whatever the pooled buffer held before: not another log's bytes, which
// a crash would leave past the data for recovery to take for batches. And
// the tail kept is the segment's own copy, not the pooled buffer's bytes,
// which the next user overwrites.
func TestDirectPaddingIsZeros(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // keep the dirty buffers in the pool
	d := newDirectLog(t, smallConfig())
	dirtyBuffers()
	d.add(sizedBatch(t, 1000, 1))
	requireDirect(t, d.l)
	f, err := os.Open(segmentPath(d.dir, 0, logSuffix))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pad := make([]byte, directBlock-1000)
	if _, err := f.ReadAt(pad, 1000); err != nil {
		t.Fatal(err)
	}
	if i := bytes.IndexFunc(pad, func(r rune) bool { return r != 0 }); i >= 0 {
		t.Fatalf("byte %d past the data is %#x, want the padding zeros", 1000+i, pad[i])
	}
	dirtyBuffers()
	d.add(sizedBatch(t, 500, 2)) // from the tail kept
	d.check()
	d.close()
	d.checkFiles()
}

// dirtyBuffers takes what the buffer pool holds (earlier writes' buffers)
// and more, fills them with 0xAA and gives them back: whichever buffer
// the next direct write gets is dirty.
func dirtyBuffers() {
	var dirty []*[]byte
	for range 16 {
		b := directBuffers.Get().(*[]byte)
		for i := range *b {
			(*b)[i] = 0xAA
		}
		dirty = append(dirty, b)
	}
	for _, b := range dirty {
		directBuffers.Put(b)
	}
}

// TestDirectRefusalWarnedOnce: a log whose segments refuse direct writes
// says so once, at Warn, with the file and why: not at each append that
// writes through the page cache instead, nor again when the next segment
// refuses too. The first segment refuses the open (a path that does not
// exist, as in TestDirectRefusedWritesBuffered), the next the write
// (EINVAL, as in TestDirectWriteRefusedWritesBuffered).
func TestDirectRefusalWarnedOnce(t *testing.T) {
	cfg := smallConfig()
	cfg.SegmentBytes = 20000
	dir := directDir(t)
	warns := &warnings{}
	l, err := Open(dir, cfg, slog.New(warns))
	if err != nil {
		t.Fatal(err)
	}
	l.WriteDirect(true)
	d := &directLog{t: t, dir: dir, cfg: cfg, l: l}
	defer d.close()

	first := d.activeSegment()
	h := first.file
	h.cache.mu.Lock()
	path := h.path
	h.path = filepath.Join(dir, "missing", filepath.Base(path))
	h.cache.mu.Unlock()
	for i := range 3 {
		d.add(sizedBatch(t, 3000, int64(i)))
	}
	h.cache.mu.Lock()
	h.path = path
	h.cache.mu.Unlock()
	got := warns.all()
	if len(got) != 1 || !strings.Contains(got[0], "file="+first.logPath) || !strings.Contains(got[0], "no such file") {
		t.Fatalf("after three appends to a segment whose direct open failed, the log warned %q: want one warning naming %s and the error", got, first.logPath)
	}

	for d.activeSegment() == first {
		d.add(sizedBatch(t, 3000, 4))
	}
	second := d.activeSegment()
	d.add(sizedBatch(t, 1000, 5))
	requireDirect(t, d.l) // a new segment tries again
	einval, err := os.OpenFile("/proc/self/clear_refs", os.O_WRONLY, 0)
	if err != nil {
		t.Skip("no /proc/self/clear_refs to refuse the write:", err)
	}
	swapDirect(second, einval).Close()
	d.add(sizedBatch(t, 2000, 6))
	d.add(sizedBatch(t, 2000, 7))
	d.l.mu.RLock()
	refused := second.directRefused
	d.l.mu.RUnlock()
	if !errors.Is(refused, syscall.EINVAL) {
		t.Fatalf("the second segment's direct writes were refused with %v, want EINVAL", refused)
	}
	if got := warns.all(); len(got) != 1 {
		t.Fatalf("the log warned %d times after a second segment refused direct writes, want once: %q", len(got), got)
	}
	d.check()
}

func (d *directLog) activeSegment() *segment {
	d.l.mu.RLock()
	defer d.l.mu.RUnlock()
	return d.l.activeLocked()
}

// warnings is a slog handler that keeps what is logged at Warn and above,
// each record as its message and attributes (but those of With).
type warnings struct {
	mu  sync.Mutex
	got []string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	s := r.Message
	r.Attrs(func(a slog.Attr) bool {
		s += " " + a.String()
		return true
	})
	w.mu.Lock()
	w.got = append(w.got, s)
	w.mu.Unlock()
	return nil
}

func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

func (w *warnings) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.got)
}
