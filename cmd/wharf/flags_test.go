package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"reflect"
	"regexp"
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
	var help bytes.Buffer
	fs := newFlagSet("x", "", "Does x.", &help)
	fs.String("data-dir", "d", "where data lives")
	bindEnv(fs, "data-dir")
	fs.Usage()
	if !strings.Contains(help.String(), "(env WHARF_DATA_DIR)") {
		t.Errorf("help does not name the env var:\n%s", help.String())
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
		{[]string{"topics", "create", "t", "--replication-factor", "0"}, 2, "--replication-factor must be between 1 and 32767"},
		{[]string{"topics", "create", "--nope"}, 2, "flag provided but not defined: --nope"},
		{[]string{"groups", "list", "--state", "stabel"}, 2, `--state "stabel": want one of`},
		{[]string{"topics", "list", "--output", "yaml"}, 2, "want table or json"},
		{[]string{"produce", "t", "--header", "novalue"}, 2, "want key=value"},
		{[]string{"consume", "t", "--group", "g", "--partition", "0"}, 2, "excludes --offset and --partition"},
		{[]string{"consume", "--topic", "a", "b"}, 2, "unexpected arguments: a"},
		{[]string{"version", "extra"}, 2, "unexpected arguments: extra"},
	}
	for _, c := range cases {
		status, _, stderr := runCLI(c.args...)
		if status != c.wantStatus || !strings.Contains(stderr, c.wantErr) {
			t.Errorf("wharf %q: status %d, stderr %q; want status %d and %q",
				c.args, status, stderr, c.wantStatus, c.wantErr)
		}
	}
}

// Every command's --help goes to stdout with status 0, writes its flags
// with two dashes as the README does, and states each default once.
func TestHelpOfEveryCommand(t *testing.T) {
	helps := [][]string{{"--help"}, {"help", "topics"}}
	for _, c := range commands() {
		helps = append(helps, []string{c.name, "--help"})
	}
	for _, c := range topicsCommands() {
		helps = append(helps, []string{"topics", c.name, "--help"})
	}
	for _, c := range groupsCommands() {
		helps = append(helps, []string{"groups", c.name, "--help"})
	}
	for _, c := range policiesCommands() {
		helps = append(helps, []string{"policies", c.name, "-h"})
	}
	singleDash := regexp.MustCompile(`(?m)^\s+-[a-z][a-z-]+`)
	for _, args := range helps {
		status, stdout, stderr := runCLI(args...)
		if status != 0 || stderr != "" || !strings.HasPrefix(stdout, "Usage") && !strings.HasPrefix(stdout, "Wharf") {
			t.Errorf("wharf %q: status %d, stderr %q, stdout:\n%s", args, status, stderr, stdout)
			continue
		}
		if m := singleDash.FindString(stdout); m != "" {
			t.Errorf("wharf %q shows a flag with one dash: %q", args, m)
		}
		for _, line := range strings.Split(stdout, "\n") {
			if strings.Count(strings.ToLower(line), "default:") > 1 {
				t.Errorf("wharf %q states a default twice: %q", args, line)
			}
		}
	}
	if _, stdout, _ := runCLI("--help"); !strings.Contains(stdout, "Kafka") || !strings.Contains(stdout, "AMQP") {
		t.Errorf("wharf --help does not name both protocols:\n%s", stdout)
	}
}

func TestHelpShowsDefaultsOnce(t *testing.T) {
	var out bytes.Buffer
	fs := newFlagSet("x", "", "Does x.", &out)
	fs.Int("partition", -1, "this partition (default: all)")
	fs.String("addr", ":9092", "listener")
	fs.Int("count", 0, "how many")
	bindEnv(fs, "addr")
	fs.Usage()
	for _, want := range []string{"--partition int\n        this partition (default: all)\n",
		"--addr string\n        listener (default: :9092) (env WHARF_ADDR)\n", "--count int\n        how many\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, out.String())
		}
	}
}
