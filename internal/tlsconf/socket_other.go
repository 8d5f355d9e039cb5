//go:build !unix

package tlsconf

import (
	"net"
	"syscall"
)

// rawConnOf is nil: reads go straight to the connection.
func rawConnOf(net.Conn) syscall.RawConn { return nil }

// readAhead is never called without a raw connection.
func (s *Socket) readAhead(uintptr) bool { return true }
