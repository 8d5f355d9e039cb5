package e2e

import (
	"context"
	"flag"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/node"
	"github.com/wharf-mq/wharf/internal/nodetest"
)

var amqp091Recovery = flag.Bool("e2e.amqp091-recovery", false,
	"run amqp091-go's own connection-recovery integration tests (about 2 minutes) against a node "+
		"whose management API listens on 127.0.0.1:15672, the port they hard-code")

// amqp091APIAddr is where amqp091-go's test utilities look for the
// management API (internal/utils/http.go): not configurable.
const amqp091APIAddr = "127.0.0.1:15672"

// TestAmqp091GoRecoverySuite runs amqp091-go's own TestConnectionRecovery*
// tests (build tag integration), unchanged, from the module cache against
// a node: AMQP_URL points them at its AMQP listener, and they drop their
// connections through its API on 127.0.0.1:15672. Behind
// -e2e.amqp091-recovery because of that fixed port (a developer's
// RabbitMQ may hold it) and their two minutes of waiting.
// TestConnectionRecoveryThroughTheAPI covers the same path in every run.
func TestAmqp091GoRecoverySuite(t *testing.T) {
	if !*amqp091Recovery {
		t.Skip("needs 127.0.0.1:15672 and two minutes: run with -e2e.amqp091-recovery")
	}
	if ln, err := net.Listen("tcp", amqp091APIAddr); err != nil {
		t.Fatalf("%s is taken (%v): amqp091-go's tests need it for the management API; stop what listens there", amqp091APIAddr, err)
	} else {
		ln.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dir, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/rabbitmq/amqp091-go").Output()
	if err != nil {
		t.Fatalf("finding amqp091-go in the module cache: %v", err)
	}
	// The module cache is read-only; go test wants to write go.sum.
	src := filepath.Join(t.TempDir(), "amqp091-go")
	if err := os.CopyFS(src, os.DirFS(strings.TrimSpace(string(dir)))); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, nodetest.WithConfig(func(c *node.Config) { c.HTTPAddr = amqp091APIAddr }))

	cmd := exec.CommandContext(ctx, "go", "test", "-tags", "integration", "-run", "^TestConnectionRecovery", "-count=1", "-v", ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "AMQP_URL="+nodetest.AMQPURL(n))
	out, err := cmd.CombinedOutput()
	passed := regexp.MustCompile(`(?m)^--- PASS: `).FindAll(out, -1)
	failed := regexp.MustCompile(`(?m)^--- FAIL: .*$`).FindAll(out, -1)
	t.Logf("amqp091-go recovery tests: %d passed, %d failed", len(passed), len(failed))
	if err != nil || len(passed) == 0 {
		t.Fatalf("amqp091-go's recovery tests: %v\n%s", err, out)
	}
}
