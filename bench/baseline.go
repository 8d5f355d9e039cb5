package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

// The streaming baseline's shape: large writes and rare fsyncs, about what
// the disk can sustain when nothing waits for durability.
const (
	streamWriteSize = 1 << 20
	streamSyncEvery = 64 << 20
)

// diskFsyncPerChunk writes total bytes to a new file in dir, chunk bytes at
// a time, with an fdatasync after every chunk: what a writer that makes each
// batch durable on its own can do. It stops early if maxTime passes
// (0: no cap). The file is removed afterwards.
func diskFsyncPerChunk(dir string, total, chunk int64, maxTime time.Duration) (result, error) {
	if chunk <= 0 || total <= 0 {
		return result{}, fmt.Errorf("disk fsync per chunk: chunk %d and total %d must be positive", chunk, total)
	}
	f, err := os.CreateTemp(dir, "baseline-fsync-*")
	if err != nil {
		return result{}, err
	}
	defer os.Remove(f.Name())
	defer f.Close()

	buf := payload(int(chunk))
	start := time.Now()
	var written int64
	for written < total {
		n := min(chunk, total-written)
		if _, err := f.Write(buf[:n]); err != nil {
			return result{}, err
		}
		if err := datasync(f); err != nil {
			return result{}, err
		}
		written += n
		if maxTime > 0 && time.Since(start) >= maxTime {
			break
		}
	}
	return result{bytes: written, elapsed: time.Since(start)}, f.Close()
}

// diskStreaming writes 1 MiB chunks to a new file in dir with an fdatasync every
// 64 MiB and one at the end, until lim says stop (lim.records counts bytes
// here). The file is removed afterwards.
func diskStreaming(dir string, lim limit) (result, error) {
	f, err := os.CreateTemp(dir, "baseline-stream-*")
	if err != nil {
		return result{}, err
	}
	defer os.Remove(f.Name())
	defer f.Close()

	buf := payload(streamWriteSize)
	start := time.Now()
	var written, sinceSync int64
	for !streamDone(lim, written, start) {
		if _, err := f.Write(buf); err != nil {
			return result{}, err
		}
		written += streamWriteSize
		sinceSync += streamWriteSize
		if sinceSync >= streamSyncEvery {
			if err := datasync(f); err != nil {
				return result{}, err
			}
			sinceSync = 0
		}
	}
	if err := datasync(f); err != nil {
		return result{}, err
	}
	return result{bytes: written, elapsed: time.Since(start)}, f.Close()
}

// streamDone applies lim to the byte-stream baselines, where lim.records
// counts bytes (testing.B's b.N times the write size).
func streamDone(lim limit, written int64, start time.Time) bool {
	if lim.timed() {
		return time.Since(start) >= lim.duration
	}
	return written >= lim.records
}

// loopbackTCP sends bytes over a 127.0.0.1 connection: one goroutine writes
// 1 MiB buffers, another reads them into a 1 MiB buffer and discards them.
// The run ends when the reader has seen everything the writer sent, so the
// figure is end to end. It sends total bytes, or for lim.duration.
func loopbackTCP(lim limit) (result, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return result{}, err
	}
	defer ln.Close()

	type readResult struct {
		n   int64
		err error
	}
	received := make(chan readResult, 1)
	// The reader goroutine ends when the writer closes its side (EOF) or
	// the listener fails.
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			received <- readResult{err: err}
			return
		}
		defer conn.Close()
		buf := make([]byte, streamWriteSize)
		var n int64
		for {
			m, err := conn.Read(buf)
			n += int64(m)
			if errors.Is(err, io.EOF) {
				received <- readResult{n: n}
				return
			}
			if err != nil {
				received <- readResult{n: n, err: err}
				return
			}
		}
	}()

	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return result{}, err
	}
	buf := payload(streamWriteSize)
	start := time.Now()
	var sent int64
	for !streamDone(lim, sent, start) {
		if _, err := conn.Write(buf); err != nil {
			conn.Close()
			return result{}, err
		}
		sent += streamWriteSize
	}
	if err := conn.Close(); err != nil {
		return result{}, err
	}
	got := <-received
	elapsed := time.Since(start)
	if got.err != nil {
		return result{}, got.err
	}
	if got.n != sent {
		return result{}, fmt.Errorf("loopback: sent %d bytes, received %d", sent, got.n)
	}
	return result{bytes: sent, elapsed: elapsed}, nil
}
