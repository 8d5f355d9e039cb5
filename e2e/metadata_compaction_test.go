package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/wharf-mq/wharf/internal/node"
	"github.com/wharf-mq/wharf/internal/nodetest"
)

// TestMetadataLogCompactsThroughClients: 1,000 topics created and deleted
// through kadm and 1,000 durable queues declared and deleted through
// amqp091-go leave a metadata log the cleaner shrinks, and a restart on
// the compacted log gives back the same topics, topic configs, ACLs and
// queues.
func TestMetadataLogCompactsThroughClients(t *testing.T) {
	dir := t.TempDir()
	ctx := testContext(t)
	// The churn stays in the metadata log's active segment, which the
	// node's own cleaner loop leaves alone: only the explicit pass below,
	// after a restart with small segments rolled it, compacts it.
	// ACLs need the authorizer; the test's anonymous client is a super user.
	authorizer := nodetest.WithConfig(func(c *node.Config) {
		c.KafkaSecurity = node.KafkaSecurityConfig{Authorizer: true, SuperUsers: []string{"User:ANONYMOUS"}}
	})
	n := nodetest.Start(t, nodetest.WithDataDir(dir), authorizer)
	adm := newAdmin(t, n)
	retention := "3600000"
	createTopic(t, adm, "kept", 2, map[string]*string{"retention.ms": &retention})
	created, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("kept").
		Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil || len(created) != 1 || created[0].Err != nil {
		t.Fatalf("CreateACLs: %v %+v", err, created)
	}
	const churn = 1000
	var names []string
	for i := range churn {
		names = append(names, fmt.Sprintf("churn-%d", i))
	}
	for batch := range slices.Chunk(names, 100) {
		if _, err := adm.CreateTopics(ctx, 1, 1, nil, batch...); err != nil {
			t.Fatal(err)
		}
		if _, err := adm.DeleteTopics(ctx, batch...); err != nil {
			t.Fatal(err)
		}
	}
	ch := streamChannel(t, n)
	if _, err := ch.QueueDeclare("kept-q", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if _, err := ch.QueueDeclare(name, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := ch.QueueDelete(name, false, false, false); err != nil {
			t.Fatal(err)
		}
	}
	want := metadataView(t, n)
	if len(want.topics) != 1 || want.retention != retention || len(want.acls) != 1 ||
		!want.queues["kept-q"] || want.queues["churn-0"] {
		t.Fatalf("before any restart: %+v", want)
	}
	closeNode(t, n)

	smallSegments := nodetest.WithConfig(func(c *node.Config) { c.MetadataLogSegmentBytes = 16 << 10 })
	n = nodetest.Start(t, nodetest.WithDataDir(dir), authorizer, smallSegments)
	if got := metadataView(t, n); !reflect.DeepEqual(got, want) {
		t.Fatalf("restart before compaction: got %v, want %v", got, want)
	}
	// A write rolls the churn's segment; the cleaner compacts it.
	if _, err := newAdmin(t, n).CreateTopic(ctx, 1, 1, nil, "after-restart"); err != nil {
		t.Fatal(err)
	}
	want.topics = append(want.topics, "after-restart")
	slices.Sort(want.topics)
	before := metadataLogBytes(t, dir)
	if err := n.Broker().CompactNow(); err != nil {
		t.Fatal(err)
	}
	after := metadataLogBytes(t, dir)
	t.Logf("metadata log: %d bytes before compaction, %d after (tombstones kept for delete.retention.ms)", before, after)
	if after*2 > before {
		t.Errorf("metadata log %d bytes after compaction, %d before: it should have halved at least", after, before)
	}
	closeNode(t, n)

	n = nodetest.Start(t, nodetest.WithDataDir(dir), authorizer, smallSegments)
	if got := metadataView(t, n); !reflect.DeepEqual(got, want) {
		t.Fatalf("restart after compaction: got %v, want %v", got, want)
	}
}

// metadataSeen is what clients see of the metadata log's state: topics,
// the kept topic's retention.ms, ACLs, and which queues exist.
type metadataSeen struct {
	topics    []string
	retention string
	acls      []string
	queues    map[string]bool
}

func metadataView(t *testing.T, n *node.Node) metadataSeen {
	t.Helper()
	ctx := testContext(t)
	adm := newAdmin(t, n)
	var seen metadataSeen
	listed, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen.topics = listed.Names()
	slices.Sort(seen.topics)
	cfgs, err := adm.DescribeTopicConfigs(ctx, "kept")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfgs[0].Configs {
		if c.Key == "retention.ms" {
			seen.retention = c.MaybeValue()
		}
	}
	described, err := adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().AllowHosts().
		Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range described {
		for _, a := range d.Described {
			seen.acls = append(seen.acls, fmt.Sprintf("%s %s %s %s", a.Principal, a.Name, a.Operation, a.Permission))
		}
	}
	slices.Sort(seen.acls)
	seen.queues = map[string]bool{}
	for _, q := range []string{"kept-q", "churn-0", "churn-999"} {
		// A channel each: a passive declare of a missing queue closes it.
		_, err := streamChannel(t, n).QueueDeclarePassive(q, true, false, false, false, nil)
		seen.queues[q] = err == nil
	}
	return seen
}

// metadataLogBytes is the bytes of the metadata log's segment files.
func metadataLogBytes(t *testing.T, dataDir string) int64 {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dataDir, "__cluster_metadata-0", "*.log"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("metadata log segments: %v %v", segs, err)
	}
	var total int64
	for _, s := range segs {
		fi, err := os.Stat(s)
		if err != nil {
			t.Fatal(err)
		}
		total += fi.Size()
	}
	return total
}
