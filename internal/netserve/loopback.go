package netserve

import "net/netip"

// FromLoopback reports whether remote, a peer address as net.Addr.String
// and http.Request.RemoteAddr give it ("127.0.0.1:5555", "[::1]:5555",
// "[fe80::1%eth0]:5555"), is a loopback address. Anything that does not
// parse as an IP address and port is not: a check guarding what only local
// clients may do fails closed. An IPv4-mapped IPv6 address counts as its
// IPv4 address, and a zone does not make a link-local address local.
func FromLoopback(remote string) bool {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return false
	}
	return ap.Addr().Unmap().IsLoopback()
}
