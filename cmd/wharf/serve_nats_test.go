package main

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/wharf-mq/wharf/internal/nats"
)

func parseNATSFlags(t *testing.T, args ...string) natsFlags {
	t.Helper()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := natsServeFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestNATSServeFlags(t *testing.T) {
	f := parseNATSFlags(t)
	cfg, err := f.config()
	if err != nil || *f.addr != ":4222" || cfg.Token != "" || cfg.Users != nil || cfg.MaxPayload != nats.DefaultMaxPayload {
		t.Errorf("defaults: addr %q, %+v, %v", *f.addr, cfg, err)
	}
	f = parseNATSFlags(t, "--nats-user", "alice", "--nats-password", "secret", "--nats-max-payload", "4096")
	if cfg, err = f.config(); err != nil || cfg.Users["alice"] != "secret" || cfg.MaxPayload != 4096 {
		t.Errorf("user: %+v, %v", cfg, err)
	}
	f = parseNATSFlags(t, "--nats-token", "tok")
	if cfg, err = f.config(); err != nil || cfg.Token != "tok" {
		t.Errorf("token: %+v, %v", cfg, err)
	}
	for _, bad := range [][]string{
		{"--nats-user", "alice"},
		{"--nats-password", "secret"},
		{"--nats-user", "alice", "--nats-password", "secret", "--nats-token", "tok"},
		{"--nats-max-payload", "0"},
	} {
		f := parseNATSFlags(t, bad...)
		var ue usageError
		if _, err := f.config(); !errors.As(err, &ue) || !strings.Contains(err.Error(), "--nats-") {
			t.Errorf("%v: %v, want a usage error", bad, err)
		}
	}
}
