package main

import (
	"errors"
	"flag"
	"io"
	"testing"
)

// TestTLSListenerFlags: the TLS listeners take their defaults only with a
// certificate; naming one without a certificate, by flag or by
// environment variable, is a usage error; empty turns one off.
func TestTLSListenerFlags(t *testing.T) {
	parse := func(env map[string]string, args ...string) (*flag.FlagSet, tlsListenerFlags) {
		t.Helper()
		for k, v := range env {
			t.Setenv(k, v)
		}
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f := tlsListenerServeFlags(fs)
		if _, err := parseArgs(fs, args, bindEnv(fs, tlsListenerEnv...)); err != nil {
			t.Fatal(err)
		}
		return fs, f
	}
	fs, f := parse(nil)
	if amqps, https, err := f.addrs(fs, true); err != nil || amqps != ":5671" || https != ":15671" {
		t.Errorf("with a certificate, the defaults: %q %q %v", amqps, https, err)
	}
	if amqps, https, err := f.addrs(fs, false); err != nil || amqps != "" || https != "" {
		t.Errorf("without a certificate, none: %q %q %v", amqps, https, err)
	}
	fs, f = parse(nil, "--https-addr", "")
	if amqps, https, err := f.addrs(fs, true); err != nil || amqps != ":5671" || https != "" {
		t.Errorf("--https-addr '': %q %q %v", amqps, https, err)
	}
	if _, _, err := f.addrs(fs, false); err != nil {
		t.Errorf("--https-addr '' without a certificate: %v", err)
	}
	for _, tc := range []struct {
		env  map[string]string
		args []string
	}{
		{nil, []string{"--amqps-addr", ":5671"}},
		{map[string]string{"WHARF_HTTPS_ADDR": "127.0.0.1:15671"}, nil},
	} {
		fs, f := parse(tc.env, tc.args...)
		var usage usageError
		if _, _, err := f.addrs(fs, false); !errors.As(err, &usage) {
			t.Errorf("%v %v without a certificate: %v, want a usage error", tc.env, tc.args, err)
		}
	}
}
