package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// wharfServer is a `wharf serve` subprocess with its Kafka, AMQP and NATS
// listeners on free loopback ports.
type wharfServer struct {
	*child
	dataDir   string
	kafkaAddr string
	amqpAddr  string
	natsAddr  string
	httpAddr  string // the management API, read for /metrics (commitCounters)
}

// buildWharf compiles ./cmd/wharf from the module at root into dir and
// returns the binary's path.
func buildWharf(ctx context.Context, root, dir string) (string, error) {
	bin := filepath.Join(dir, "wharf")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/wharf")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/wharf: %v\n%s", err, out)
	}
	return bin, nil
}

// startWharf runs `wharf serve` on dataDir with the binary's default
// durability (acks=all and confirms wait for a group-committed fdatasync)
// and waits until every listener accepts.
func (s *suite) startWharf(ctx context.Context, dataDir string) (*wharfServer, error) {
	kport, err := freePort()
	if err != nil {
		return nil, err
	}
	aport, err := freePort()
	if err != nil {
		return nil, err
	}
	nport, err := freePort()
	if err != nil {
		return nil, err
	}
	hport, err := freePort()
	if err != nil {
		return nil, err
	}
	w := &wharfServer{dataDir: dataDir, kafkaAddr: loopback(kport), amqpAddr: loopback(aport), natsAddr: loopback(nport), httpAddr: loopback(hport)}
	cmd, err := s.wharfCommand(w)
	if err != nil {
		return nil, err
	}
	w.child, err = s.procs.start("wharf", cmd, filepath.Join(s.work, "wharf.log"))
	if err != nil {
		return nil, err
	}
	for _, addr := range []string{w.kafkaAddr, w.amqpAddr, w.natsAddr, w.httpAddr} {
		if err := waitForTCP(ctx, w.child, addr, 2*time.Minute); err != nil {
			w.terminate(10 * time.Second)
			return nil, err
		}
	}
	return w, nil
}

// wharfLogSize is the current length of the Wharf processes' shared log.
func (s *suite) wharfLogSize() int64 {
	info, err := os.Stat(filepath.Join(s.work, "wharf.log"))
	if err != nil {
		return 0
	}
	return info.Size()
}

// wharfLogSince reports whether the Wharf log mentions text after byte
// offset from.
func (s *suite) wharfLogSince(from int64, text string) bool {
	b, err := os.ReadFile(filepath.Join(s.work, "wharf.log"))
	if err != nil || int64(len(b)) < from {
		return false
	}
	return bytes.Contains(b[from:], []byte(text))
}

func (w *wharfServer) amqpURL() string { return "amqp://guest:guest@" + w.amqpAddr + "/" }
