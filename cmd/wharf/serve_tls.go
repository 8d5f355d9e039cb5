package main

import "flag"

// The TLS listeners' default addresses: RabbitMQ's AMQPS port and its
// management plugin's HTTPS port (management.ssl.port).
const (
	defaultAMQPSAddr = ":5671"
	defaultHTTPSAddr = ":15671"
)

// tlsListenerFlags are the AMQPS and HTTPS listeners' flags. Like
// RabbitMQ, which binds them only when given certificates, wharf serve
// binds them only with --tls-cert: beside the plain listeners, which
// stay as --amqp-addr and --http-addr say (empty to go TLS-only).
type tlsListenerFlags struct {
	amqps, https *string
}

func tlsListenerServeFlags(fs *flag.FlagSet) tlsListenerFlags {
	return tlsListenerFlags{
		amqps: fs.String("amqps-addr", defaultAMQPSAddr, "AMQP 0-9-1 over TLS listener address, bound only with --tls-cert (empty: none)"),
		https: fs.String("https-addr", defaultHTTPSAddr, "HTTPS management API address, bound only with --tls-cert (empty: none)"),
	}
}

// tlsListenerEnv names the flags bindEnv maps to WHARF_ variables.
var tlsListenerEnv = []string{"amqps-addr", "https-addr"}

// addrs returns the addresses to bind: the flags' with a certificate;
// none without, where setting either flag is a usage error rather than
// a listener that silently does not exist.
func (f tlsListenerFlags) addrs(fs *flag.FlagSet, haveCert bool) (amqps, https string, err error) {
	if haveCert {
		return *f.amqps, *f.https, nil
	}
	fs.Visit(func(fl *flag.Flag) {
		if (fl.Name == "amqps-addr" || fl.Name == "https-addr") && fl.Value.String() != "" && err == nil {
			err = usagef("--%s needs --tls-cert and --tls-key", fl.Name)
		}
	})
	return "", "", err
}
