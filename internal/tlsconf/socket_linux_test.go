package tlsconf

import (
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
