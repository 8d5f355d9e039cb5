package reliability

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFuzzTargets runs every fuzz target of the module for
// -reliability.fuzztime each, one after the other (go test -fuzz takes one
// target at a time), as subprocesses of the go command. Without the flag it
// is skipped: a plain go test already runs every target's seed corpus.
func TestFuzzTargets(t *testing.T) {
	if *fuzzTimeFlag <= 0 {
		t.Skip("set -reliability.fuzztime (e.g. 30s) to fuzz every target for that long; the seed corpora run in every go test")
	}
	root := moduleRoot(t)
	targets := listFuzzTargets(t, root)
	if len(targets) == 0 {
		t.Fatal("no fuzz targets found")
	}
	t.Logf("%d fuzz targets, %v each", len(targets), *fuzzTimeFlag)
	for _, tg := range targets {
		t.Run(filepath.Base(tg.pkg)+"/"+tg.name, func(t *testing.T) {
			// Generous: building the fuzzing binary takes a while too.
			ctx, cancel := context.WithTimeout(context.Background(), *fuzzTimeFlag+5*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, goTool(), "test", "-run=^$", "-fuzz=^"+tg.name+"$",
				"-fuzztime="+fuzzTimeFlag.String(), tg.pkg)
			cmd.Dir = root
			start := time.Now()
			out, err := cmd.CombinedOutput()
			took := time.Since(start).Round(time.Second)
			switch {
			case err == nil:
				t.Logf("%s", lastLines(out, 3))
			case toolchainDeadlineRace(out):
				t.Logf("go test -fuzz=%s %s ended with the fuzz coordinator's deadline race (golang/go#75804, fixed in Go 1.27), no failing input: not a failure\n%s",
					tg.name, tg.pkg, lastLines(out, 6))
			default:
				t.Fatalf("go test -fuzz=%s %s: %v after %v\n%s", tg.name, tg.pkg, err, took, tail(out, 8<<10))
			}
		})
	}
}

// toolchainDeadlineRace recognises go1.26's spurious fuzzing failure: a
// bare "context deadline exceeded" as -fuzztime expires, with no failing
// input written (a real one says "Failing input written to").
func toolchainDeadlineRace(out []byte) bool {
	return bytes.Contains(out, []byte("context deadline exceeded")) &&
		!bytes.Contains(out, []byte("Failing input written to")) &&
		!bytes.Contains(out, []byte("panic:"))
}

// fuzzTarget is one Fuzz function of a package.
type fuzzTarget struct{ pkg, name string }

// listFuzzTargets asks the go command for the fuzz targets of every
// package of the module.
func listFuzzTargets(t *testing.T, root string) []fuzzTarget {
	t.Helper()
	cmd := exec.Command(goTool(), "test", "-list=^Fuzz", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go test -list: %v\n%s", err, tail(out, 4<<10))
	}
	// Names come before the "ok  <package>" line of their package.
	var targets []fuzzTarget
	var names []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		switch {
		case strings.HasPrefix(line, "Fuzz"):
			names = append(names, strings.TrimSpace(line))
		case len(fields) >= 2 && (fields[0] == "ok" || fields[0] == "?"):
			for _, n := range names {
				targets = append(targets, fuzzTarget{pkg: fields[1], name: n})
			}
			names = nil
		}
	}
	return targets
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(goTool(), "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// goTool is the go command running this test: $GOROOT/bin/go if go test
// set GOROOT, else "go" from PATH.
func goTool() string {
	if root := os.Getenv("GOROOT"); root != "" {
		p := filepath.Join(root, "bin", "go")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "go"
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
