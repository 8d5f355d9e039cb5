package e2e

import (
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var natsCLI = flag.String("e2e.natscli", "",
	"run the stock nats CLI against a node: the path of a nats binary, or \"build\" to go install "+
		"github.com/nats-io/natscli/nats@"+natsCLIVersion+" (through the Go module proxy) into a temporary directory")

// natsCLIVersion is the nats CLI the test builds.
const natsCLIVersion = "v0.5.0"

// TestNATSCLI drives a node's JetStream with the stock nats CLI: a stream
// added, published to, listed, read by a pull consumer, a message fetched
// by sequence, a KV bucket written and read, the stream removed; each
// command's answer checked. Behind -e2e.natscli because the CLI is no
// Debian package: the flag gives its binary or builds it.
func TestNATSCLI(t *testing.T) {
	if *natsCLI == "" {
		t.Skip("needs the nats CLI: run with -e2e.natscli=PATH or -e2e.natscli=build")
	}
	bin := *natsCLI
	if bin == "build" {
		dir := t.TempDir()
		cmd := exec.Command("go", "install", "github.com/nats-io/natscli/nats@"+natsCLIVersion)
		cmd.Env = append(os.Environ(), "GOBIN="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go install natscli: %v\n%s", err, out)
		}
		bin = filepath.Join(dir, "nats")
	}
	srv := startWharfJetStream(t)
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--server", srv.url, "--no-context", "--timeout", "5s"}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "XDG_CONFIG_HOME="+t.TempDir())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("nats %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	expect := func(out string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("output lacks %q:\n%s", w, out)
			}
		}
	}

	expect(run("stream", "add", "ORDERS", "--subjects", "orders.>", "--defaults"), "Stream ORDERS was created")
	for _, body := range []string{"one", "two", "three"} {
		expect(run("pub", "orders.new", body, "--jetstream"), "Stored in Stream: ORDERS")
	}
	expect(run("stream", "ls"), "ORDERS")
	var info struct {
		Config struct {
			Subjects []string `json:"subjects"`
		} `json:"config"`
		State struct {
			Msgs    uint64 `json:"messages"`
			LastSeq uint64 `json:"last_seq"`
		} `json:"state"`
	}
	if err := json.Unmarshal([]byte(run("stream", "info", "ORDERS", "--json")), &info); err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 3 || info.State.LastSeq != 3 || len(info.Config.Subjects) != 1 {
		t.Errorf("stream info --json: %+v", info)
	}
	expect(run("consumer", "add", "ORDERS", "work", "--pull", "--deliver", "all", "--ack", "explicit", "--defaults"),
		"Name: work", "Ack Policy: Explicit")
	expect(run("consumer", "next", "ORDERS", "work", "--count", "2"), "one", "two", "Acknowledged message")
	expect(run("consumer", "info", "ORDERS", "work"), "Unprocessed Messages: 1")
	expect(run("stream", "get", "ORDERS", "3"), "three")
	expect(run("kv", "add", "CFG", "--history", "3"), "CFG")
	run("kv", "put", "CFG", "color", "red")
	expect(run("kv", "get", "CFG", "color", "--raw"), "red")
	expect(run("kv", "ls"), "CFG")
	run("stream", "rm", "ORDERS", "--force")
	if out := run("stream", "ls", "--names"); strings.Contains(out, "ORDERS") {
		t.Errorf("ORDERS still listed after rm:\n%s", out)
	}
}
