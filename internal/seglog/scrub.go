package seglog

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sort"
	"time"

	"github.com/wharf-mq/wharf/internal/record"
)

// Scrubbing.
//
// Open trusts what it does not verify (doc.go, Recovery): after a clean
// Close every segment, after a crash every segment below the one holding
// the recovery point. A byte flipped there would be served until a client's
// CRC check tripped on it. Scrub closes that gap after the fact: it reads
// those segments in the background and verifies every batch, and the first
// bad one makes the log corrupt for good (until it is reopened): Read and
// Append return the *CorruptionError from then on. Between Open and the
// moment Scrub reaches the damage, the damaged batch can still be read; the
// broker runs Scrub right after start-up to keep that window short.

// scrubChunk is how much Scrub reads with one pread: large enough to make
// the read sequential and cheap per byte, small enough to keep the memory
// and the time between two cancellation checks bounded.
const scrubChunk = 1 << 20

// crcStart is where the CRC-32C-covered part of a batch begins (the
// attributes field), as the v2 record batch format defines it.
const crcStart = 21

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ScrubOptions say what Scrub covers and how fast it may read.
type ScrubOptions struct {
	// Full verifies every segment, including those Open verified: a
	// periodic scrub looking for damage done since. Without it Scrub
	// covers only what Open trusted without looking.
	Full bool
	// BytesPerSecond caps the read rate so that a scrub does not starve
	// clients of disk bandwidth; 0 or less means no cap.
	BytesPerSecond int64
}

// ScrubStats is what one Scrub read.
type ScrubStats struct {
	Segments int
	Batches  int64
	Bytes    int64
}

// Corruption returns the *CorruptionError Scrub found, or nil. Once set it
// stays set until the log is reopened.
func (l *Log) Corruption() error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.corrupt == nil {
		return nil
	}
	return l.corrupt
}

// Scrub verifies the CRC-32C of every batch of the segments Open did not
// verify (all segments with opt.Full), below each segment's write position
// at the moment Scrub reaches it, and checks that batch offsets increase
// within the segment's range (the CRC does not cover the base offset). It
// reads at most scrubChunk bytes at a time without holding the log's lock,
// so appends and reads go on meanwhile, and returns ctx.Err() promptly when
// ctx is cancelled.
//
// On the first bad batch it marks the log corrupt (see Corruption) and
// returns the *CorruptionError naming the file and position; Read and
// Append return that error from then on. Damage in a segment that
// retention or compaction removed while it was being read is ignored.
func (l *Log) Scrub(ctx context.Context, opt ScrubOptions) (ScrubStats, error) {
	return l.scrub(ctx, opt, scrubChunk)
}

func (l *Log) scrub(ctx context.Context, opt ScrubOptions, chunk int64) (ScrubStats, error) {
	var st ScrubStats
	p := newPacer(opt.BytesPerSecond)
	after := int64(-1) // base offset of the last segment scrubbed
	for {
		v, ok, err := l.nextToScrub(after, opt.Full)
		if err != nil || !ok {
			return st, err
		}
		st.Segments++
		err = scrubSegment(ctx, v, chunk, p, &st)
		v.release()
		var ce *CorruptionError
		if errors.As(err, &ce) {
			if err := l.markCorrupt(v.seg, ce); err != nil {
				return st, err
			}
		} else if err != nil {
			return st, err
		}
		after = v.seg.base
	}
}

// nextToScrub returns a view of the first segment after the one based at
// after that needs scrubbing. Following base offsets rather than list
// positions keeps the walk right while retention or compaction changes the
// list.
func (l *Log) nextToScrub(after int64, full bool) (segView, bool, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	switch {
	case l.closed:
		return segView{}, false, ErrClosed
	case l.corrupt != nil:
		return segView{}, false, l.corrupt
	}
	i := sort.Search(len(l.segments), func(i int) bool { return l.segments[i].base > after })
	for ; i < len(l.segments); i++ {
		if s := l.segments[i]; (full || !s.verifiedAtOpen) && s.size > 0 {
			v, err := s.viewLocked()
			return v, err == nil, err
		}
	}
	return segView{}, false, nil
}

// markCorrupt records ce unless seg, or the part of it holding the
// damage, has left the log meanwhile (the damage went with it: retention,
// compaction, TruncateTo). It returns the error Scrub should return, nil
// to go on.
func (l *Log) markCorrupt(seg *segment, ce *CorruptionError) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	i := l.segmentIndexLocked(seg.base)
	if l.segments[i] != seg || ce.Pos >= seg.size {
		l.logger.Info("scrub: ignoring damage in a segment removed or cut meanwhile", "err", ce)
		return nil
	}
	if l.corrupt == nil {
		l.corrupt = ce
		l.logger.Error("scrub found a corrupt record batch; the log refuses reads and appends until it is repaired and reopened", "err", ce)
	}
	return l.corrupt
}

// scrubSegment verifies the batches of v below v.limit, a chunk at a time.
func scrubSegment(ctx context.Context, v segView, chunk int64, p *pacer, st *ScrubStats) error {
	s := v.seg
	buf := make([]byte, min(max(chunk, 2*record.HeaderSize), v.limit))
	bad := func(pos int64, err error) error { return &CorruptionError{File: s.logPath, Pos: pos, Err: err} }
	next := s.base // the next batch must start at or after this offset
	for pos := int64(0); pos < v.limit; {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(int64(len(buf)), v.limit-pos)
		if err := readFull(v, buf[:n], pos); err != nil {
			return err
		}
		if err := p.wait(ctx, n); err != nil {
			return err
		}
		// Verify the batches that start in buf[:n]; one that does not end
		// there is read again from its start by the next round, unless it
		// starts the chunk (larger than a chunk: its CRC is streamed).
		at := int64(0)
		for at < n {
			left := v.limit - (pos + at)
			if left < record.HeaderSize {
				return bad(pos+at, fmt.Errorf("%w: %d trailing bytes, less than a batch header", record.ErrShort, left))
			}
			if n-at < record.HeaderSize {
				break // header split by the chunk's end
			}
			h, err := peekHead(buf[at:n])
			if err != nil {
				return bad(pos+at, err)
			}
			if h.size > left {
				return bad(pos+at, fmt.Errorf("%w: batch of %d bytes runs past the end of the segment (%d bytes left)", record.ErrShort, h.size, left))
			}
			if h.baseOffset < next || h.lastOffset >= v.next {
				return bad(pos+at, fmt.Errorf("%w: batch holds offsets %d-%d, expected them within %d-%d", record.ErrCorrupt, h.baseOffset, h.lastOffset, next, v.next-1))
			}
			if at+h.size <= n {
				if _, err := record.Verify(buf[at : at+h.size]); err != nil {
					return bad(pos+at, err)
				}
			} else if at > 0 {
				break
			} else if err := verifyLarge(ctx, v, pos, h, buf, p); errors.Is(err, record.ErrCorrupt) {
				return bad(pos, err)
			} else if err != nil {
				return err
			}
			at += h.size
			next = h.lastOffset + 1
			st.Batches++
		}
		pos += at
		st.Bytes += at
	}
	return nil
}

// verifyLarge checks the CRC-32C of a batch too large for buf (buf holds
// its first bytes), reading the rest a buffer at a time.
func verifyLarge(ctx context.Context, v segView, pos int64, h batchHead, buf []byte, p *pacer) error {
	head, err := record.ParseHeader(buf[:record.HeaderSize])
	if err != nil && !errors.Is(err, record.ErrShort) {
		return err
	}
	crc := crc32.Update(0, castagnoli, buf[crcStart:])
	for at := int64(len(buf)); at < h.size; {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(int64(len(buf)), h.size-at)
		if err := readFull(v, buf[:n], pos+at); err != nil {
			return err
		}
		if err := p.wait(ctx, n); err != nil {
			return err
		}
		crc = crc32.Update(crc, castagnoli, buf[:n])
		at += n
	}
	if crc != head.CRC {
		return fmt.Errorf("%w: crc %#08x, header says %#08x", record.ErrCorrupt, crc, head.CRC)
	}
	return nil
}

func readFull(v segView, b []byte, pos int64) error {
	if _, err := v.f.ReadAt(b, pos); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("seglog: scrub %s: %w", v.seg.logPath, err)
	}
	return nil
}

// pacer keeps a scrub's average read rate at or below a limit.
type pacer struct {
	rate  int64 // bytes per second; <= 0: no limit
	start time.Time
	done  int64
}

func newPacer(rate int64) *pacer { return &pacer{rate: rate, start: time.Now()} }

// wait accounts for n bytes read and, if the scrub is ahead of its rate,
// waits until it no longer is or ctx is done.
func (p *pacer) wait(ctx context.Context, n int64) error {
	if p.rate <= 0 {
		return nil
	}
	p.done += n
	due := p.start.Add(time.Duration(float64(p.done) / float64(p.rate) * float64(time.Second)))
	d := time.Until(due)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
