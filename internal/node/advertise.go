package node

import "net"

// AdvertisedHost picks the host clients are told to connect to: the
// configured one if set, else the host of the listen address, else
// "localhost" when the listener binds every interface (":9092",
// "0.0.0.0:9092", "[::]:9092"), since a wildcard address is not
// connectable from other processes on every platform.
func AdvertisedHost(configured, listenAddr string) string {
	if configured != "" {
		return configured
	}
	host, _, err := net.SplitHostPort(listenAddr)
	if err != nil || host == "" {
		return "localhost"
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return "localhost"
	}
	return host
}
