package crash

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestSecondBrokerOnOneDataDirIsRefused runs two `wharf serve` on one data
// directory: the second must exit non-zero at once, naming the first's
// pid, and leave the first serving. After a kill -9 of the first (the
// kernel drops its lock) a new broker starts on the directory.
func TestSecondBrokerOnOneDataDirIsRefused(t *testing.T) {
	bin := wharfBinary(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	logs := t.TempDir()
	first := startBroker(t, bin, dataDir, filepath.Join(logs, "first.log"), false)

	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	second := exec.CommandContext(ctx, bin, "serve", "--data-dir", dataDir,
		"--kafka-addr", freeLoopbackAddr(t), "--amqp-addr=", "--http-addr=", "--nats-addr=")
	second.Env = environWithoutWharf()
	out, err := second.CombinedOutput()
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("the second broker on %s was still running after %v\n%s", dataDir, readyTimeout, out)
	case !errors.As(err, &exitErr):
		t.Fatalf("the second broker on %s: want a non-zero exit, got %v\n%s", dataDir, err, out)
	}
	pid := "pid " + strconv.Itoa(first.cmd.Process.Pid)
	if !strings.Contains(string(out), pid) {
		t.Errorf("the second broker's refusal does not name the first (%s):\n%s", pid, out)
	}
	t.Logf("second broker: %v: %s", err, strings.TrimSpace(string(out)))
	if !first.running() {
		t.Fatalf("the first broker stopped when the second was refused\n%s", first.logTail())
	}

	first.kill()
	third := startBroker(t, bin, dataDir, filepath.Join(logs, "third.log"), false)
	third.stop()
}
