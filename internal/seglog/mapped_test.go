package seglog

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
)

// mappedConfig makes segments of many pages, so that a read spans pages
// and segments and starts inside a page.
func mappedConfig() Config {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 64 << 10
	return cfg
}

// TestWriteMappedToMatchesBytes: what WriteMappedTo hands the writer is
// the slice's bytes, from any offset, across segments.
func TestWriteMappedToMatchesBytes(t *testing.T) {
	l := mustOpen(t, t.TempDir(), mappedConfig())
	defer l.Close()
	end := appendBatches(t, l, 300, 20, 0)
	if len(segmentFiles(t, l.dir)) < 3 {
		t.Fatalf("want several segments, have %v", segmentFiles(t, l.dir))
	}
	for _, from := range []int64{0, 1234, end - 1} {
		s, err := l.Read(from, 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		checkMappedRead(t, s)
		s.Release()
	}
}

// sealingWriter encrypts what it is written with AES-GCM, as crypto/tls
// does a record (assembly reading the mapped pages), after running
// before once.
type sealingWriter struct {
	aead   cipher.AEAD
	before func()
	sealed int
}

func newSealingWriter(t *testing.T, before func()) *sealingWriter {
	block, err := aes.NewCipher(make([]byte, 16))
	if err != nil {
		t.Fatal(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatal(err)
	}
	return &sealingWriter{aead: aead, before: before}
}

func (w *sealingWriter) Write(p []byte) (int, error) {
	if w.before != nil {
		w.before()
		w.before = nil
	}
	out := w.aead.Seal(nil, make([]byte, w.aead.NonceSize()), p, nil)
	w.sealed += len(out) - w.aead.Overhead()
	return len(p), nil
}

// TestWriteMappedToFileCutShort: a segment file truncated underneath a
// mapped read (as a follower cuts a diverged log) fails that read with
// an error, not the process with SIGBUS; the log goes on serving.
func TestWriteMappedToFileCutShort(t *testing.T) {
	l := mustOpen(t, t.TempDir(), mappedConfig())
	defer l.Close()
	appendBatches(t, l, 300, 20, 0)
	s, err := l.Read(0, 32<<10)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	first := s.Chunks[0].File.Name()

	w := newSealingWriter(t, func() {
		if err := os.Truncate(first, 0); err != nil {
			t.Fatal(err)
		}
	})
	n, err := s.WriteMappedTo(w)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("WriteMappedTo of a file cut to nothing = %d, %v; want io.ErrUnexpectedEOF", n, err)
	}
	if debug.SetPanicOnFault(false) {
		t.Fatal("WriteMappedTo left SetPanicOnFault on")
	}

	// Another segment still reads whole.
	last := l.EndOffset() - 1
	s2, err := l.Read(last, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Release()
	checkMappedRead(t, s2)
}

// TestWriteMappedToRemovedSegment: a segment deleted (retention,
// compaction) while its mapped read runs is still read whole, as a
// sendfile of it is.
func TestWriteMappedToRemovedSegment(t *testing.T) {
	l := mustOpen(t, t.TempDir(), mappedConfig())
	defer l.Close()
	appendBatches(t, l, 300, 20, 0)
	s, err := l.Read(0, 32<<10)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	want, _ := s.Bytes()

	var got bytes.Buffer
	removed := false
	w := writerFunc(func(p []byte) (int, error) {
		if !removed {
			if err := s.segs[0].removeFiles(); err != nil {
				t.Fatal(err)
			}
			removed = true
		}
		return got.Write(p)
	})
	if _, err := s.WriteMappedTo(w); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatal("a removed segment's mapped bytes differ from what it held")
	}
}

// TestWriteMappedToPassesOtherPanicsOn: only a fault on the mapping is
// turned into an error.
func TestWriteMappedToPassesOtherPanicsOn(t *testing.T) {
	l := mustOpen(t, t.TempDir(), mappedConfig())
	defer l.Close()
	appendBatches(t, l, 10, 20, 0)
	s, err := l.Read(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	defer func() {
		if r := recover(); r != "writer bug" {
			t.Fatalf("recovered %v, want the writer's own panic", r)
		}
	}()
	s.WriteMappedTo(writerFunc(func([]byte) (int, error) { panic("writer bug") }))
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// mappedFiles counts the process's mappings of files under dir.
func mappedFiles(t *testing.T, dir string) int {
	t.Helper()
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skip("no /proc/self/maps:", err)
	}
	return bytes.Count(maps, []byte(" "+dir+"/"))
}

// checkMappedRead reads s through WriteMappedTo and checks it against Bytes.
func checkMappedRead(t *testing.T, s *Slice) {
	t.Helper()
	want, err := s.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if n, err := s.WriteMappedTo(&got); err != nil || n != int64(len(want)) {
		t.Fatalf("WriteMappedTo = %d, %v; want %d bytes", n, err, len(want))
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatal("mapped bytes differ from the slice's")
	}
}

// TestMappingIsKeptWithTheFile: a segment file is mapped once for every
// read of it while the file cache keeps it open, and unmapped when the
// file is closed.
func TestMappingIsKeptWithTheFile(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("files are mapped on Linux only")
	}
	dir := t.TempDir()
	l := mustOpen(t, dir, mappedConfig())
	appendBatches(t, l, 20, 20, 0)
	for range 3 {
		s, err := l.Read(0, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		checkMappedRead(t, s)
		s.Release()
		if got := mappedFiles(t, dir); got != 1 {
			t.Fatalf("%d mappings of the log's one segment after reading it", got)
		}
	}
	l.Close()
	if got := mappedFiles(t, dir); got != 0 {
		t.Fatalf("%d mappings left after Close", got)
	}
}

// TestMappingsStayWithinTheirLimit: reading more segment files than
// maxMappings unmaps the least recently read; when every mapping is in
// use, a read copies instead, and all reads return the log's bytes.
func TestMappingsStayWithinTheirLimit(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("files are mapped on Linux only")
	}
	const limit = 2
	files.mu.Lock()
	prev := files.mapLimit
	files.mapLimit = limit
	files.mu.Unlock()
	t.Cleanup(func() {
		files.mu.Lock()
		files.mapLimit = prev
		files.mu.Unlock()
	})
	withMaxOpenFiles(t, 16)
	dir := t.TempDir()
	l := mustOpen(t, dir, mappedConfig())
	defer l.Close()
	appendBatches(t, l, 600, 20, 0)
	segments := segmentFiles(t, dir)
	if len(segments) <= limit+1 {
		t.Fatalf("want more than %d segments, have %d", limit+1, len(segments))
	}
	readSegment := func(path string) *Slice {
		t.Helper()
		base, err := strconv.ParseInt(strings.TrimSuffix(filepath.Base(path), logSuffix), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		s, err := l.Read(base, 1)
		if err != nil {
			t.Fatal(err)
		}
		checkMappedRead(t, s)
		if got := mappedFiles(t, dir); got > limit {
			t.Fatalf("%d files mapped, limit %d", got, limit)
		}
		return s
	}

	// Read one after the other: each evicts the least recently read.
	for _, path := range segments {
		s := readSegment(path)
		if !isMapped(s) {
			t.Fatalf("%s was not mapped: no idle mapping was evicted for it", path)
		}
		s.Release()
	}
	// Reads of the first segments go on while the others are read:
	// those find no mapping to evict, and copy.
	var held []*Slice
	defer func() {
		for _, s := range held {
			s.Release()
		}
	}()
	for i, path := range segments {
		s := readSegment(path)
		if i < limit {
			held = append(held, s)
		} else {
			s.Release()
		}
	}
}

// isMapped reports whether the file of s's first chunk is mapped.
func isMapped(s *Slice) bool {
	files.mu.Lock()
	defer files.mu.Unlock()
	return s.Chunks[0].handle.mapped != nil
}
