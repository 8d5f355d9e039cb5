//go:build unix

package tlsconf

import (
	"io"
	"net"
	"os"
	"syscall"
)

// rawConnOf is the socket under nc, for reads that take a buffer only
// once there is input; nil when nc is not a socket.
func rawConnOf(nc net.Conn) syscall.RawConn {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// readAhead is called by raw.Read with the socket, non-blocking: it reads
// what is there into a pooled buffer, or gives the buffer back and has the
// runtime's poller wait for input when there is none.
func (s *Socket) readAhead(fd uintptr) bool {
	buf := readAheadBufs.Get().(*[]byte)
	for {
		n, err := syscall.Read(int(fd), *buf)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			readAheadBufs.Put(buf)
			return false
		case err != nil:
			readAheadBufs.Put(buf)
			s.readErr = os.NewSyscallError("read", err)
		case n == 0:
			readAheadBufs.Put(buf)
			s.readErr = io.EOF
		default:
			s.in, s.inBuf = (*buf)[:n], buf
		}
		return true
	}
}
