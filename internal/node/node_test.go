package node_test

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wharf-mq/wharf/internal/node"
	"github.com/wharf-mq/wharf/internal/nodetest"
)

func newClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func TestNodeServesKafkaAndSurvivesRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dataDir := t.TempDir()
	n := nodetest.Start(t, nodetest.WithDataDir(dataDir))

	host, port, err := net.SplitHostPort(n.KafkaAddr())
	if err != nil || host != "127.0.0.1" || port == "0" {
		t.Fatalf("KafkaAddr() = %q, want 127.0.0.1 with a real port", n.KafkaAddr())
	}
	if n.AdvertisedKafkaAddr() != n.KafkaAddr() {
		t.Errorf("advertised %q, want the listener's address %q", n.AdvertisedKafkaAddr(), n.KafkaAddr())
	}

	adm := kadm.NewClient(newClient(t, n.KafkaAddr()))
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "orders"); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	if _, err := n.Broker().Topic("orders"); err != nil {
		t.Fatalf("topic created over Kafka is not in the node's broker: %v", err)
	}
	producer := newClient(t, n.KafkaAddr(), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err := producer.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 0, Key: []byte("k"), Value: []byte("durable")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	producer.Close()

	if err := n.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := n.Close(ctx); err != nil {
		t.Errorf("second Close: %v", err)
	}
	select {
	case <-n.Done():
	default:
		t.Error("Done not closed after Close")
	}
	if n.Err() != nil {
		t.Errorf("Err after Close = %v, want nil", n.Err())
	}
	if _, err := net.DialTimeout("tcp", n.KafkaAddr(), time.Second); err == nil {
		t.Error("Kafka listener still accepts after Close")
	}
	requireCleanShutdown(t, dataDir, 2)

	// A new node on the same data directory serves the record.
	n2 := nodetest.Start(t, nodetest.WithDataDir(dataDir))
	consumer := newClient(t, n2.KafkaAddr(), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		"orders": {0: kgo.NewOffset().AtStart()},
	}))
	fetches := consumer.PollRecords(ctx, 1)
	if errs := fetches.Errors(); len(errs) > 0 {
		t.Fatalf("fetch after restart: %v", errs)
	}
	recs := fetches.Records()
	if len(recs) != 1 || string(recs[0].Value) != "durable" || string(recs[0].Key) != "k" {
		t.Fatalf("after restart read %v, want the record produced before", recs)
	}
}

func TestWildcardListenerAdvertisesLocalhost(t *testing.T) {
	n := nodetest.Start(t, nodetest.WithConfig(func(c *node.Config) { c.KafkaAddr = ":0" }))
	_, port, _ := net.SplitHostPort(n.KafkaAddr())
	portNum, err := strconv.Atoi(port)
	if err != nil {
		t.Fatalf("KafkaAddr() = %q", n.KafkaAddr())
	}
	if want := net.JoinHostPort("localhost", port); n.AdvertisedKafkaAddr() != want {
		t.Errorf("advertised %q, want %q", n.AdvertisedKafkaAddr(), want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	meta, err := kadm.NewClient(newClient(t, "127.0.0.1:"+port)).BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(meta.Brokers) != 1 || meta.Brokers[0].Host != "localhost" || meta.Brokers[0].Port != int32(portNum) {
		t.Errorf("Metadata brokers = %+v, want localhost:%s", meta.Brokers, port)
	}
}

func TestConfiguredAdvertisedHostReachesMetadata(t *testing.T) {
	n := nodetest.Start(t, nodetest.WithConfig(func(c *node.Config) { c.AdvertisedHost = "127.0.0.1" }))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	meta, err := kadm.NewClient(newClient(t, n.KafkaAddr())).BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(meta.Brokers) != 1 || meta.Brokers[0].Host != "127.0.0.1" {
		t.Errorf("Metadata brokers = %+v, want host 127.0.0.1", meta.Brokers)
	}
}

func TestStartFailsCleanlyWhenPortTaken(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dataDir := t.TempDir()

	_, err = node.Start(node.Config{DataDir: dataDir, KafkaAddr: taken.Addr().String()})
	if err == nil || !strings.Contains(err.Error(), "listen") {
		t.Fatalf("Start on a taken port: err = %v, want a listen error", err)
	}
	// The broker opened before the listen failed was closed cleanly, so the
	// data directory can be opened again at once.
	requireCleanShutdown(t, dataDir, 0)
	nodetest.Start(t, nodetest.WithDataDir(dataDir))
}

func TestStartRejectsEmptyDataDir(t *testing.T) {
	if _, err := node.Start(node.Config{KafkaAddr: "127.0.0.1:0"}); err == nil {
		t.Fatal("Start with no data directory succeeded")
	}
}

// requireCleanShutdown checks that every directory holding segment files
// under root has a clean-shutdown marker, and that there are at least min
// of them.
func requireCleanShutdown(t *testing.T, root string, min int) {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if matches, _ := filepath.Glob(filepath.Join(path, "*.log")); len(matches) > 0 {
				dirs = append(dirs, path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < min {
		t.Errorf("found %d log directories under %s, want at least %d", len(dirs), root, min)
	}
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, "clean-shutdown")); err != nil {
			t.Errorf("%s: no clean-shutdown marker: %v", dir, err)
		}
	}
}

// The Kafka connection limits reach the Kafka front end: an idle
// connection is closed after KafkaConnectionsMaxIdle, and a request other
// than Produce over KafkaMaxNonProduceRequestBytes at once.
func TestKafkaConnectionLimitsReachTheServer(t *testing.T) {
	n := nodetest.Start(t, nodetest.WithConfig(func(c *node.Config) {
		c.KafkaConnectionsMaxIdle = 200 * time.Millisecond
		c.KafkaMaxNonProduceRequestBytes = 1024
	}))
	closedWithin := func(nc net.Conn, d time.Duration) bool {
		nc.SetReadDeadline(time.Now().Add(d))
		_, err := nc.Read(make([]byte, 1))
		var ne net.Error
		return err != nil && !(errors.As(err, &ne) && ne.Timeout())
	}
	dial := func() net.Conn {
		nc, err := net.Dial("tcp", n.KafkaAddr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		return nc
	}

	idle := dial()
	start := time.Now()
	if !closedWithin(idle, 10*time.Second) {
		t.Fatal("idle connection still open after 10s")
	}
	if took := time.Since(start); took < 150*time.Millisecond {
		t.Errorf("idle connection closed after %v, before KafkaConnectionsMaxIdle", took)
	}

	big := dial()
	// A 2048-byte Metadata v12 request announced: over the 1024 limit.
	big.Write([]byte{0, 0, 8, 0, 0, 3, 0, 12})
	if !closedWithin(big, 100*time.Millisecond) {
		t.Error("an oversized Metadata request did not close its connection at once")
	}
}
