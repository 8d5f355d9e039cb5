package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseArgsAllowsFlagsAfterPositionals(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	partitions := fs.Int("partitions", -1, "")
	var configs stringList
	fs.Var(&configs, "config", "")

	args, err := parseArgs(fs, []string{"--config", "a=1", "orders", "--partitions", "3", "--config=b=2", "extra"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"orders", "extra"}; !reflect.DeepEqual(args, want) {
		t.Errorf("positional = %q, want %q", args, want)
	}
	if *partitions != 3 {
		t.Errorf("partitions = %d, want 3", *partitions)
	}
	if want := (stringList{"a=1", "b=2"}); !reflect.DeepEqual(configs, want) {
		t.Errorf("configs = %q, want %q", configs, want)
	}
}

func TestParseArgsDoubleDashEndsFlags(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	verbose := fs.Bool("v", false, "")
	args, err := parseArgs(fs, []string{"topic", "--", "-v", "x"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"topic", "-v", "x"}; !reflect.DeepEqual(args, want) {
		t.Errorf("positional = %q, want %q", args, want)
	}
	if *verbose {
		t.Error("-v after -- was parsed as a flag")
	}
}

func TestParseArgsFlagBeatsEnvBeatsDefault(t *testing.T) {
	newFS := func() (*flag.FlagSet, *string, *time.Duration, []string) {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		addr := fs.String("kafka-addr", ":9092", "")
		interval := fs.Duration("flush-interval", time.Second, "")
		return fs, addr, interval, bindEnv(fs, "kafka-addr", "flush-interval")
	}

	fs, addr, interval, env := newFS()
	if _, err := parseArgs(fs, nil, env); err != nil {
		t.Fatal(err)
	}
	if *addr != ":9092" || *interval != time.Second {
		t.Errorf("defaults: got %q %v", *addr, *interval)
	}

	t.Setenv("WHARF_KAFKA_ADDR", ":1111")
	t.Setenv("WHARF_FLUSH_INTERVAL", "250ms")
	fs, addr, interval, env = newFS()
	if _, err := parseArgs(fs, nil, env); err != nil {
		t.Fatal(err)
	}
	if *addr != ":1111" || *interval != 250*time.Millisecond {
		t.Errorf("env: got %q %v", *addr, *interval)
	}

	fs, addr, interval, env = newFS()
	if _, err := parseArgs(fs, []string{"--kafka-addr", ":2222"}, env); err != nil {
		t.Fatal(err)
	}
	if *addr != ":2222" || *interval != 250*time.Millisecond {
		t.Errorf("flag over env: got %q %v", *addr, *interval)
	}

	t.Setenv("WHARF_FLUSH_INTERVAL", "soon")
	fs, _, _, env = newFS()
	_, err := parseArgs(fs, nil, env)
	var usage usageError
	if !errors.As(err, &usage) || !strings.Contains(err.Error(), "WHARF_FLUSH_INTERVAL") {
		t.Errorf("bad env value: err = %v, want a usage error naming the variable", err)
	}
}

func TestEnvNameAndHelpText(t *testing.T) {
	if got := envName("bootstrap-server"); got != "WHARF_BOOTSTRAP_SERVER" {
		t.Errorf("envName = %q", got)
	}
	var stderr bytes.Buffer
	fs := newFlagSet("x", "", "Does x.", &stderr)
	fs.String("data-dir", "d", "where data lives")
	bindEnv(fs, "data-dir")
	fs.Usage()
	if !strings.Contains(stderr.String(), "(env WHARF_DATA_DIR)") {
		t.Errorf("help does not name the env var:\n%s", stderr.String())
	}
}

func TestParseConfigs(t *testing.T) {
	got, err := parseConfigs([]string{"retention.ms=1000", "cleanup.policy=delete", "x="})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || *got["retention.ms"] != "1000" || *got["cleanup.policy"] != "delete" || *got["x"] != "" {
		t.Errorf("parseConfigs = %v", got)
	}
	for _, bad := range []string{"novalue", "=v"} {
		if _, err := parseConfigs([]string{bad}); err == nil {
			t.Errorf("parseConfigs(%q): no error", bad)
		}
	}
}

// runCLI runs the command line in-process.
func runCLI(args ...string) (status int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	status = run(args, stdio{in: strings.NewReader(""), out: &out, err: &errOut})
	return status, out.String(), errOut.String()
}

func TestUsageAndExitStatus(t *testing.T) {
	status, stdout, _ := runCLI("--help")
	if status != 0 {
		t.Errorf("--help: status %d", status)
	}
	for _, c := range []string{"serve", "topics", "produce", "consume"} {
		if !strings.Contains(stdout, c) {
			t.Errorf("--help does not list %s:\n%s", c, stdout)
		}
	}

	cases := []struct {
		args       []string
		wantStatus int
		wantErr    string
	}{
		{nil, 2, "Usage"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"serve", "--fsync", "sometimes"}, 2, "--fsync"},
		{[]string{"serve", "--no-such-flag"}, 2, "no-such-flag"},
		{[]string{"serve", "extra"}, 2, "unexpected arguments: extra"},
		{[]string{"topics"}, 2, "missing topics command"},
		{[]string{"topics", "rename"}, 2, `unknown topics command "rename"`},
		{[]string{"topics", "create"}, 2, "missing topic name"},
		{[]string{"topics", "alter", "t"}, 2, "nothing to alter"},
		{[]string{"topics", "create", "t", "--config", "oops"}, 2, "want key=value"},
		{[]string{"produce"}, 2, "missing topic name"},
		{[]string{"produce", "t", "--acks", "2"}, 2, "--acks"},
		{[]string{"consume", "t", "--from-beginning", "--offset", "3"}, 2, "exclude each other"},
		{[]string{"consume", "t", "--format", "%q"}, 2, "unknown field %q"},
		{[]string{"consume", "--help"}, 0, "%k key"},
	}
	for _, c := range cases {
		status, _, stderr := runCLI(c.args...)
		if status != c.wantStatus || !strings.Contains(stderr, c.wantErr) {
			t.Errorf("wharf %q: status %d, stderr %q; want status %d and %q",
				c.args, status, stderr, c.wantStatus, c.wantErr)
		}
	}
}
