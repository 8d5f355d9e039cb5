package seglog

import (
	"io"
	"net"
	"os"
	"syscall"
)

// Why not io.Copy(conn, io.NewSectionReader(file, ...))? The net package uses
// sendfile(2) only when the source is an *os.File (or an *io.LimitedReader
// around one), and then it sends from the file's current offset and moves
// it: state shared by every reader of the segment's one descriptor, so two
// concurrent fetches would interleave each other's bytes. A SectionReader is
// safe but never takes the sendfile path (plain read/write copies).
//
// So writeChunk calls sendfile(2) itself with an explicit offset argument,
// which neither reads nor moves the file offset: concurrent fetches of the
// same segment are independent, with no extra open(2) or dup per read. It
// runs inside the connection's RawConn.Write so the runtime's poller waits
// for writability on EAGAIN and the connection's write deadline applies,
// and inside the file's RawConn.Control so the descriptor cannot be closed
// underneath it.
func writeChunk(w io.Writer, c Chunk) (int64, error) {
	conn, ok := w.(*net.TCPConn)
	if !ok {
		return copyChunk(w, c)
	}
	dst, err := conn.SyscallConn()
	if err != nil {
		return copyChunk(w, c)
	}
	src, err := c.File.SyscallConn()
	if err != nil {
		return copyChunk(w, c)
	}
	var written int64
	var sendErr error
	ctlErr := src.Control(func(srcFd uintptr) {
		writeErr := dst.Write(func(dstFd uintptr) bool {
			for written < c.Len {
				off := c.Pos + written
				n, err := syscall.Sendfile(int(dstFd), int(srcFd), &off, int(min(c.Len-written, 1<<30)))
				if n > 0 {
					written += int64(n)
				}
				switch {
				case err == syscall.EAGAIN:
					return false // wait until the socket is writable
				case err == syscall.EINTR:
				case err != nil:
					sendErr = err
					return true
				case n == 0:
					sendErr = io.ErrUnexpectedEOF // the file is shorter than the chunk
					return true
				}
			}
			return true
		})
		if sendErr == nil {
			sendErr = writeErr
		}
	})
	if ctlErr != nil {
		return written, ctlErr
	}
	if sendErr == syscall.EINVAL || sendErr == syscall.ENOSYS {
		if written == 0 { // sendfile unsupported here: copy instead
			return copyChunk(w, c)
		}
	}
	if errno, ok := sendErr.(syscall.Errno); ok {
		return written, &net.OpError{Op: "sendfile", Net: "tcp", Addr: conn.RemoteAddr(), Err: os.NewSyscallError("sendfile", errno)}
	}
	if sendErr != nil {
		return written, sendErr // from the poller: closed connection, deadline
	}
	return written, nil
}
