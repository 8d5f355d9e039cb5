package kafka

import (
	"net"
	"syscall"
)

// withCork runs write with TCP_CORK set on a TCP connection, so that the
// small framing writes and the sendfile calls of one fetch response leave
// in full segments instead of a small packet per write (Go sets
// TCP_NODELAY). Uncorking flushes whatever is left.
func withCork(nc net.Conn, write func() error) error {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return write()
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return write()
	}
	setCork(raw, 1)
	err = write()
	setCork(raw, 0)
	return err
}

func setCork(raw syscall.RawConn, on int) {
	raw.Control(func(fd uintptr) {
		// Best effort: a failure only costs packet efficiency.
		syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CORK, on)
	})
}
