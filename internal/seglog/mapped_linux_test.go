//go:build linux && (amd64 || arm64)

package seglog

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestWriteMappedToCopiesWhatIsNotInMemory: a chunk whose pages are not
// in the page cache is read with pread, not faulted in through the
// mapping (which would hold a scheduler P while the disk reads); once
// cached, it is read through the mapping.
func TestWriteMappedToCopiesWhatIsNotInMemory(t *testing.T) {
	l := mustOpen(t, t.TempDir(), mappedConfig())
	defer l.Close()
	appendBatches(t, l, 100, 20, 0)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	s, err := l.Read(0, 32<<10)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	want, err := s.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	const fadvDontNeed = 4 // POSIX_FADV_DONTNEED: drop the file's clean pages from the cache
	if _, _, errno := syscall.Syscall6(syscall.SYS_FADVISE64, s.Chunks[0].File.Fd(), 0, 0, fadvDontNeed, 0, 0); errno != 0 {
		t.Skip("fadvise:", errno)
	}

	for _, pass := range []struct {
		name   string
		copied bool
	}{{"out of the page cache", true}, {"back in it", false}} {
		before := bytesRead(t)
		var got bytes.Buffer
		if _, err := s.WriteMappedTo(&got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("%s: the bytes differ from the log's", pass.name)
		}
		if read := bytesRead(t) - before; (read >= int64(len(want))) != pass.copied {
			t.Fatalf("%s: %d bytes read with read(2) for a chunk of %d; want it copied: %v", pass.name, read, len(want), pass.copied)
		}
	}
}

// bytesRead is how many bytes the process has read with read(2) and its
// kin (rchar in /proc/self/io).
func bytesRead(t *testing.T) int64 {
	t.Helper()
	stats, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Skip("no /proc/self/io:", err)
	}
	for line := range strings.Lines(string(stats)) {
		if v, ok := strings.CutPrefix(line, "rchar: "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no rchar in /proc/self/io")
	return 0
}
