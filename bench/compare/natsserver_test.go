package main

import (
	"strings"
	"testing"
)

func TestNATSConfigSetsSyncOnlyForSyncAlways(t *testing.T) {
	always := natsConfig("127.0.0.1:4222", "/data/n", natsSyncAlways)
	for _, want := range []string{`listen: "127.0.0.1:4222"`, `store_dir: "/data/n/store"`, "sync_interval: always"} {
		if !strings.Contains(always, want) {
			t.Errorf("sync-always config lacks %q:\n%s", want, always)
		}
	}
	if def := natsConfig("127.0.0.1:4222", "/data/n", natsSyncDefault); strings.Contains(def, "sync_interval") {
		t.Errorf("default config must keep nats-server's sync interval:\n%s", def)
	}
}
