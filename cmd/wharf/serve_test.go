package main

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/kafka"
)

func TestKafkaLimits(t *testing.T) {
	cfg, err := kafkaLimits(time.Minute, 1000, 2000, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	want := kafka.Config{ConnectionsMaxIdle: time.Minute, MaxRequestBytes: 1000, MaxNonProduceRequestBytes: 2000, QueuedMaxRequestBytes: 1 << 20}
	if cfg.ConnectionsMaxIdle != want.ConnectionsMaxIdle || cfg.MaxRequestBytes != want.MaxRequestBytes ||
		cfg.MaxNonProduceRequestBytes != want.MaxNonProduceRequestBytes || cfg.QueuedMaxRequestBytes != want.QueuedMaxRequestBytes {
		t.Errorf("kafkaLimits = %+v, want %+v", cfg, want)
	}
	// 0 is "never" and "no bound" on the command line, negative in the
	// front end's config (where 0 is its default).
	cfg, err = kafkaLimits(0, 1000, 1000, 0)
	if err != nil || cfg.ConnectionsMaxIdle >= 0 || cfg.QueuedMaxRequestBytes >= 0 {
		t.Errorf("kafkaLimits(0, ..., 0) = %+v, %v; want negative idle and budget", cfg, err)
	}
	for _, bad := range []struct {
		idle            time.Duration
		req, nonProduce int
		queued          int64
		flag            string
	}{
		{-time.Second, 1, 1, 1, "--kafka-connections-max-idle"},
		{0, 0, 1, 1, "--kafka-max-request-bytes"},
		{0, 1 << 31, 1, 1, "--kafka-max-request-bytes"},
		{0, 1, 0, 1, "--kafka-max-non-produce-request-bytes"},
		{0, 1, 1, -1, "--kafka-queued-max-request-bytes"},
	} {
		_, err := kafkaLimits(bad.idle, bad.req, bad.nonProduce, bad.queued)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), bad.flag) {
			t.Errorf("kafkaLimits(%v, %d, %d, %d) = %v; want a usage error about %s", bad.idle, bad.req, bad.nonProduce, bad.queued, err, bad.flag)
		}
	}
}

func TestScrubBytesPerSecond(t *testing.T) {
	for flag, want := range map[int64]int64{0: -1, 1 << 20: 1 << 20} {
		if got, err := scrubBytesPerSecond(flag); got != want || err != nil {
			t.Errorf("scrubBytesPerSecond(%d) = %d, %v; want %d", flag, got, err, want)
		}
	}
	var ue usageError
	if _, err := scrubBytesPerSecond(-1); !errors.As(err, &ue) {
		t.Errorf("scrubBytesPerSecond(-1) = %v, want a usage error", err)
	}
}

// `wharf serve --kafka-connections-max-idle` closes a Kafka connection
// that sends nothing.
func TestServeClosesIdleKafkaConnections(t *testing.T) {
	s := startServer(t, wharfBinary(t), "--kafka-connections-max-idle", "300ms")
	nc, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	start := time.Now()
	nc.SetReadDeadline(start.Add(20 * time.Second))
	_, err = nc.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the idle connection was still open after 20s")
	}
	if took := time.Since(start); took < 250*time.Millisecond {
		t.Errorf("closed after %v, before the 300ms idle time", took)
	}
	if err := s.stop(t); err != nil {
		t.Errorf("wharf serve after SIGTERM: %v", err)
	}
}

func TestMaxConnectionsFlag(t *testing.T) {
	for flag, want := range map[string]int{"auto": 0, "0": -1, "500": 500} {
		if got, err := maxConnections(flag); err != nil || got != want {
			t.Errorf("--max-connections %s: %d, %v; want %d", flag, got, err, want)
		}
	}
	for _, bad := range []string{"-1", "lots", ""} {
		if _, err := maxConnections(bad); err == nil {
			t.Errorf("--max-connections %q accepted", bad)
		}
	}
}
