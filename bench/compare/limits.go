package main

import (
	"context"
	"crypto/rand"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"
)

// The machine's own limits, measured in the same run and on the same disk
// as the brokers, so each broker figure can be read against what the
// hardware allows. (The idea is the one ./bench uses; this is a separate,
// shorter implementation so the two commands stay independent.)

// runLoopbackTCP copies 1 MiB writes from one goroutine to another over a
// 127.0.0.1 TCP connection until the window ends and reports MB/s.
func (s *suite) runLoopbackTCP(ctx context.Context) (figures, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	type result struct {
		bytes int64
		err   error
	}
	w := s.newWindow()
	got := make(chan result, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			got <- result{err: err}
			return
		}
		defer conn.Close()
		buf := make([]byte, 1<<20)
		var n int64
		for {
			k, err := conn.Read(buf)
			if w.contains(time.Now()) {
				n += int64(k)
			}
			if err != nil {
				got <- result{bytes: n}
				return
			}
		}
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 1<<20)
	for time.Now().Before(w.end) && ctx.Err() == nil {
		if _, err := conn.Write(buf); err != nil {
			conn.Close()
			return nil, err
		}
	}
	conn.Close()
	r := <-got
	if r.err != nil {
		return nil, r.err
	}
	return figures{"mbps": float64(r.bytes) / w.seconds() / 1e6}, nil
}

// runColdRead writes a file of size bytes (1 MiB writes, fdatasync at the
// end), drops the page cache, then reads the file back with sequential 1 MiB
// reads and reports MB/s ("mbps"): what one reader gets from this disk when
// nothing is cached. It also returns how the cache was dropped.
func (s *suite) runColdRead(ctx context.Context, size int64) (figures, string, error) {
	f, err := os.CreateTemp(s.work, "cold-read-limit-*")
	if err != nil {
		return nil, "", err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 1<<20)
	rand.Read(buf)
	for written := int64(0); written < size; written += int64(len(buf)) {
		if err := ctx.Err(); err != nil {
			return nil, "", err
		}
		if _, err := f.Write(buf[:min(int64(len(buf)), size-written)]); err != nil {
			return nil, "", err
		}
	}
	if err := datasync(f); err != nil {
		return nil, "", err
	}
	how, err := dropPageCache(f.Name())
	if err != nil {
		return nil, "", err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, "", err
	}
	start := time.Now()
	var read int64
	for ctx.Err() == nil {
		n, err := f.Read(buf)
		read += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, "", err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	return figures{"mbps": float64(read) / time.Since(start).Seconds() / 1e6}, how, nil
}

// dirSize is the total size of the regular files under dir.
func dirSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}
