package httpapi

import (
	"net"
	"net/netip"
	"os"
	"strings"
)

// localHost reports whether a request's Host header names this machine
// the way a local client does: localhost or a name under .localhost, a
// loopback address, or the machine's host name, with any port. A
// loopback-only user (guest) must use one of these, so that a web page
// whose own name a DNS rebinding points at 127.0.0.1 cannot use the
// default credentials from a visitor's browser: the browser sends the
// page's name. Other users' passwords are not known to such a page, so
// their requests may name the broker as they like (RabbitMQ checks no
// Host at all).
func (s *Server) localHost(hostHeader string) bool {
	host := hostHeader
	if h, _, err := net.SplitHostPort(hostHeader); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	if addr, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return addr.Unmap().IsLoopback()
	}
	return host != "" && host == s.hostname
}

// machineName is the host name a local client may use for the API, in
// lower case; "" if it cannot be read.
func machineName() string {
	name, err := os.Hostname()
	if err != nil {
		return ""
	}
	return strings.ToLower(name)
}
