//go:build !linux

package raft

import "net"

// setUserTimeout does nothing: TCP_USER_TIMEOUT is Linux's. Elsewhere a
// connection cut off keeps what was written to it until the kernel gives
// up retransmitting, and may deliver it late (forward.go).
func setUserTimeout(net.Conn) error { return nil }
