package node_test

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/node"
	"github.com/wharf-mq/wharf/internal/nodetest"
	"github.com/wharf-mq/wharf/internal/tlsconf"
)

// TestUsersLiveInTheDataDirectory: the bootstrap administrator and guest
// are created on a new node, kept across a restart without being created
// again (a changed password stays changed), and the metadata log holds no
// password in the clear.
func TestUsersLiveInTheDataDirectory(t *testing.T) {
	dataDir := t.TempDir()
	admin := nodetest.WithConfig(func(c *node.Config) {
		c.Security.AdminUser, c.Security.AdminPassword = "root", "first-secret"
	})
	n := nodetest.Start(t, nodetest.WithDataDir(dataDir), admin)
	if _, ok := n.Users().Authenticate("root", "first-secret"); !ok {
		t.Fatal("the bootstrap administrator cannot log in")
	}
	if _, ok := n.Users().Authenticate("guest", "guest"); !ok {
		t.Fatal("a new node has no guest")
	}
	if err := n.Users().SetPassword("root", "second-secret"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if found := grepDir(t, dataDir, "first-secret", "second-secret"); found != "" {
		t.Fatalf("a password is stored in the clear in %s", found)
	}

	n = nodetest.Start(t, nodetest.WithDataDir(dataDir), admin)
	if _, ok := n.Users().Authenticate("root", "second-secret"); !ok {
		t.Fatal("a restart with --admin-password reset the administrator's changed password")
	}
}

func TestTLSNeedsReadableCertificates(t *testing.T) {
	cfg := node.Config{DataDir: t.TempDir(), KafkaAddr: "127.0.0.1:0",
		Security: node.SecurityConfig{TLS: tlsconf.Files{Cert: "missing.pem", Key: "missing-key.pem"}}}
	n, err := node.Start(cfg)
	if err == nil {
		n.Close(context.Background())
		t.Fatal("a node started with certificate files that do not exist")
	}
	if !strings.Contains(err.Error(), "missing.pem") {
		t.Fatalf("the error does not name the file: %v", err)
	}
}

// grepDir returns the first file under dir that contains any of words.
func grepDir(t *testing.T, dir string, words ...string) string {
	t.Helper()
	var found string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || found != "" {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, w := range words {
			if bytes.Contains(data, []byte(w)) {
				found = path
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}
