package tlsconf

import (
	"crypto/rand"
	"io"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// TestReadAheadReadsSeveralRecordsAtOnce: once several TLS records wait
// in the socket, reading a few bytes takes them all from the kernel in
// one read, not one record per read as crypto/tls asks.
func TestReadAheadReadsSeveralRecordsAtOnce(t *testing.T) {
	const records = 3
	server, sock, under, client := socketPair(t)
	if _, err := client.Write(make([]byte, records*16<<10)); err != nil {
		t.Fatal(err)
	}
	waitForInput(t, under, records*16<<10)
	buf := make([]byte, 4<<10)
	if _, err := server.Read(buf); err != nil {
		t.Fatal(err)
	}
	if len(sock.in) < (records-1)*16<<10 {
		t.Fatalf("after one read %d bytes are read ahead, want the %d records after the first", len(sock.in), records-1)
	}
}

// waitForInput waits until the socket has at least n bytes to read.
func waitForInput(t *testing.T, c *countingConn, n int) {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var queued int32
		rc.Control(func(fd uintptr) {
			syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&queued)))
		})
		if int(queued) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d bytes arrived", queued, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// BenchmarkBatchStream writes 1 MiB in a Batch, in 256 KiB pieces (the
// Kafka front end hands crypto/tls a partition's whole file range;
// kafka's BenchmarkFetchTLS measures that), to a
// client that reads and decrypts it: the time until the client has the
// last byte, which is what a consumer waits for before it can parse the
// response, and the CPU both ends spend per MiB (cpu-ms/MiB), which on
// a machine whose cores they share is what bounds a consumer over TLS.
func BenchmarkBatchStream(b *testing.B) {
	const piece = 256 << 10
	server, sock, _, client := socketPair(b)
	msg := make([]byte, 1<<20)
	rand.Read(msg)
	buf := make([]byte, len(msg))
	b.SetBytes(int64(len(msg)))
	cpu := processCPU()
	b.ResetTimer()
	for range b.N {
		read := make(chan error, 1)
		go func() {
			_, err := io.ReadFull(client, buf)
			read <- err
		}()
		err := sock.Batch(func() error {
			for rest := msg; len(rest) > 0; rest = rest[min(len(rest), piece):] {
				if _, err := server.Write(rest[:min(len(rest), piece)]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		if err := <-read; err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(processCPU()-cpu)/1e6/float64(b.N), "cpu-ms/MiB")
}

// processCPU is the CPU time the process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
