package amqpwire

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedCodeIsUpToDate runs the generator, finding the spec the way
// `go generate` does, and compares its output with the checked-in file.
func TestGeneratedCodeIsUpToDate(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("go command not in PATH: install Go (go test puts its own on PATH)")
	}
	out := filepath.Join(t.TempDir(), "methods_gen.go")
	cmd := exec.Command(goTool, "run", "./internal/gen", "-out", out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("generator failed: %v\n%s", err, msg)
	}
	fresh, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile("methods_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fresh, committed) {
		t.Fatal("methods_gen.go is stale: run `go generate ./internal/amqpwire`")
	}
}
