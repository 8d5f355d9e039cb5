package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/wharf-mq/wharf/internal/node"
	"github.com/wharf-mq/wharf/internal/replica"
)

// With -wharf-cpuprofile, Wharf does not run as the `wharf serve` binary
// (which has no profiling flag) but as this program re-executed with
// -wharf-serve: the same node.Start that `wharf serve` calls, with the
// settings the suite gives `wharf serve` (acks-all fsync policy, listeners
// on 127.0.0.1), wrapped in a CPU profile that covers the broker process
// only, not the benchmark's clients.

// wharfCommand is the command that runs Wharf on w's data directory and
// listeners: the built binary, or the profiled re-execution.
func (s *suite) wharfCommand(w *wharfServer) (*exec.Cmd, error) {
	if s.opts.wharfProfile == "" {
		return exec.Command(s.wharfBin, "serve",
			"--data-dir", w.dataDir,
			"--kafka-addr", w.kafkaAddr,
			"--amqp-addr", w.amqpAddr,
			"--http-addr", w.httpAddr,
			// The idle-connection rows hold 5,000 connections, more than
			// the default cap (an eighth of the open-file limit); the peers
			// have no cap either.
			"--max-connections", "0",
			"--nats-addr", w.natsAddr,
			"--log-level", "warn"), nil
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	s.profileSeq++
	profile := s.opts.wharfProfile
	if s.profileSeq > 1 {
		profile = fmt.Sprintf("%s.%d", profile, s.profileSeq)
	}
	abs, err := filepath.Abs(profile)
	if err != nil {
		return nil, err
	}
	return exec.Command(self, "-wharf-serve", "-wharf-serve-profile", abs,
		"-wharf-serve-data-dir", w.dataDir, "-wharf-serve-kafka-addr", w.kafkaAddr, "-wharf-serve-amqp-addr", w.amqpAddr,
		"-wharf-serve-nats-addr", w.natsAddr, "-wharf-serve-http-addr", w.httpAddr), nil
}

// serveProfiledWharf is the body of the -wharf-serve child.
func serveProfiledWharf(profile, dataDir, kafkaAddr, amqpAddr, natsAddr, httpAddr string) error {
	f, err := os.Create(profile)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		return err
	}
	defer pprof.StopCPUProfile()
	n, err := node.Start(node.Config{
		DataDir:   dataDir,
		KafkaAddr: kafkaAddr,
		AMQPAddr:  amqpAddr,
		NATSAddr:  natsAddr,
		HTTPAddr:  httpAddr,
		Fsync:     replica.FsyncOnAcksAll,
		// No cap, as the built binary runs with --max-connections 0.
		MaxConnections: -1,
		Logger:         slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-stop:
	case <-n.Done():
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return n.Close(ctx)
}
