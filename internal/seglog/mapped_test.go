package seglog

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"errors"
	"io"
	"os"
	"runtime/debug"
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
		want, err := s.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		n, err := s.WriteMappedTo(&got)
		s.Release()
		if err != nil || n != int64(len(want)) {
			t.Fatalf("from %d: WriteMappedTo = %d, %v; want %d bytes", from, n, err, len(want))
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("from %d: mapped bytes differ from the slice's", from)
		}
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
	want, _ := s2.Bytes()
	var got bytes.Buffer
	if _, err := s2.WriteMappedTo(&got); err != nil || !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("reading another segment after the fault: %v, equal %v", err, bytes.Equal(got.Bytes(), want))
	}
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
