//go:build !linux

package kafka

import "net"

// withCork runs write; corking is a Linux optimisation.
func withCork(nc net.Conn, write func() error) error { return write() }
