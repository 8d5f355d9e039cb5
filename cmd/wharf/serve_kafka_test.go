package main

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/kafka"
	"github.com/wharf-mq/wharf/internal/node"
)

// applyKafkaSecurityFlags parses args as wharf serve would (with
// --kafka-addr beside the Kafka security flags) and applies them.
func applyKafkaSecurityFlags(t *testing.T, args ...string) (node.Config, error) {
	t.Helper()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.String("kafka-addr", defaultKafkaAddr, "")
	f := kafkaSecurityServeFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	var cfg node.Config
	err := f.apply(fs, &cfg)
	return cfg, err
}

func TestKafkaListenersFlag(t *testing.T) {
	cfg, err := applyKafkaSecurityFlags(t)
	if err != nil || cfg.KafkaListeners != nil {
		t.Fatalf("defaults: %v, %v", cfg.KafkaListeners, err)
	}
	cfg, err = applyKafkaSecurityFlags(t, "--kafka-listeners", "PLAINTEXT://127.0.0.1:9092,SASL_SSL://:9095")
	if err != nil || len(cfg.KafkaListeners) != 2 || cfg.KafkaListeners[1].Protocol != kafka.SASLSSL {
		t.Fatalf("listeners: %v, %v", cfg.KafkaListeners, err)
	}
	cfg, err = applyKafkaSecurityFlags(t, "--kafka-authorizer", "--super-users", "User:alice;User:bob", "--kafka-sasl-session-lifetime", "1h")
	if err != nil || !cfg.KafkaSecurity.Authorizer || len(cfg.KafkaSecurity.SuperUsers) != 2 || cfg.KafkaSecurity.SASLSessionLifetime != time.Hour {
		t.Fatalf("authorizer: %+v, %v", cfg.KafkaSecurity, err)
	}
	for bad, want := range map[string][]string{
		"--kafka-listeners replaces --kafka-addr": {"--kafka-addr", ":9092", "--kafka-listeners", "SSL://:9094"},
		"--kafka-listeners: listener":             {"--kafka-listeners", "TLS://:9094"},
		"need --kafka-authorizer":                 {"--super-users", "User:alice"},
		"--super-users: super user":               {"--kafka-authorizer", "--super-users", "alice"},
		"must not be negative":                    {"--kafka-sasl-session-lifetime", "-1s"},
	} {
		if _, err := applyKafkaSecurityFlags(t, want...); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("%q: %v, want %q", want, err, bad)
		}
	}
}
