package amqp

import (
	"syscall"
	"unsafe"
)

const canPeek = true

// socketHasInput reports whether a read of the socket would not block:
// data is waiting, the peer has closed, or an error is pending. It reads
// nothing (MSG_PEEK) and never blocks (MSG_DONTWAIT).
func socketHasInput(fd uintptr) bool {
	var b [1]byte
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), 1,
			syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
		switch errno {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		return true
	}
}
