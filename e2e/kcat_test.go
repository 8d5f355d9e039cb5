package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/wharf-mq/wharf/internal/node"
)

// kcatTimeout bounds one kcat run; librdkafka retries quietly for a long
// time when something is wrong, so a hang must become a failure.
const kcatTimeout = 20 * time.Second

// requireKcat fails the test when kcat (librdkafka) is not installed: the
// README lists it as a tested client, so its tests must not skip.
func requireKcat(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatal("kcat not installed: apt-get install kcat (.ci/run installs it)")
	}
	return path
}

// runKcat runs kcat with stdin and returns stdout, failing the test (with
// stderr, where librdkafka logs) if it errs or times out.
func runKcat(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	path := requireKcat(t)
	ctx, cancel := context.WithTimeout(context.Background(), kcatTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("kcat %s: no exit within %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), kcatTimeout, stdout.String(), stderr.String())
	}
	if err != nil {
		t.Fatalf("kcat %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// TestKcat drives librdkafka through kcat: metadata listing, keyed
// produce from stdin and a consume-to-end from the beginning. librdkafka
// opens every connection with an ApiVersions request at its own newest
// version; passing at all proves the broker's v0 UNSUPPORTED_VERSION
// fallback (or a matching version) works for it.
func TestKcat(t *testing.T) {
	requireKcat(t)
	t.Parallel()
	n := startNode(t)
	adm := newAdmin(t, n)
	topic := "kcat-keyed"
	createTopic(t, adm, topic, 2, nil)
	addr := n.KafkaAddr()

	meta := runKcat(t, "", "-L", "-b", addr, "-t", topic)
	for _, want := range []string{
		fmt.Sprintf("broker 1 at %s", n.AdvertisedKafkaAddr()), // a single node is broker 1, as in Kafka's sample configuration
		fmt.Sprintf("topic \"%s\" with 2 partitions:", topic),
		"partition 0, leader 1",
		"partition 1, leader 1",
	} {
		if !strings.Contains(meta, want) {
			t.Errorf("kcat -L output lacks %q:\n%s", want, meta)
		}
	}

	var in strings.Builder
	var want []string
	for seq := range 10 {
		for k := range 10 {
			line := fmt.Sprintf("key-%d=seq-%02d", k, seq)
			fmt.Fprintf(&in, "key-%d:seq-%02d\n", k, seq)
			want = append(want, line)
		}
	}
	runKcat(t, in.String(), "-P", "-b", addr, "-t", topic, "-K:", "-X", "acks=all")

	out := runKcat(t, "", "-C", "-b", addr, "-t", topic, "-o", "beginning", "-e", "-f", "%k=%s\n")
	got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	checkKcatLines(t, got, want)
}

// checkKcatLines compares consumed "key=seq-NN" lines with the produced
// ones as a multiset, and checks each key's sequence increases (the
// output keeps per-partition order, and a key lives in one partition).
func checkKcatLines(t *testing.T, got, want []string) {
	t.Helper()
	lastSeq := make(map[string]string)
	for _, line := range got {
		key, seq, ok := strings.Cut(line, "=")
		if !ok {
			t.Errorf("kcat printed %q, want key=value", line)
			continue
		}
		if prev, ok := lastSeq[key]; ok && seq <= prev {
			t.Errorf("key %s: %s consumed after %s; per-partition order not kept", key, seq, prev)
		}
		lastSeq[key] = seq
	}
	sortedGot := append([]string(nil), got...)
	sortedWant := append([]string(nil), want...)
	sort.Strings(sortedGot)
	sort.Strings(sortedWant)
	if strings.Join(sortedGot, "\n") != strings.Join(sortedWant, "\n") {
		t.Errorf("kcat consumed %d lines, produced %d; they differ as sets.\nfirst consumed: %q\nfirst produced: %q",
			len(got), len(want), head(sortedGot, 5), head(sortedWant, 5))
	}
}

func head(s []string, n int) []string {
	if len(s) < n {
		return s
	}
	return s[:n]
}

// TestKcatCompression produces through librdkafka with each codec and
// reads back with franz-go, checking the batches kept librdkafka's codec.
func TestKcatCompression(t *testing.T) {
	requireKcat(t)
	t.Parallel()
	n := startNode(t)
	adm := newAdmin(t, n)
	codecs := []struct {
		name string
		attr uint8
		// gate names the ApiVersions entries librdkafka (2.0.x, Debian's)
		// requires before it will use the codec; without them it logs
		// "Broker does not support compression type" and sends the batch
		// uncompressed. Empty: Wharf advertises what it needs.
		gate string
	}{
		{"gzip", 1, "Produce v2 and Fetch v2 (feature MsgVer1)"},
		{"snappy", 2, "Produce v2 and Fetch v2 (feature MsgVer1)"},
		{"lz4", 3, "FindCoordinator v0 (feature LZ4)"},
		{"zstd", 4, ""},
	}
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			topic := "kcat-" + c.name
			createTopic(t, adm, topic, 1, nil)
			kcatProduceCompressed(t, n, topic, c.name, c.attr, c.gate)
		})
	}
}

// kcatProduceCompressed produces 50 compressible lines with kcat -z codec
// and checks they round-trip. The batch must carry the codec unless
// librdkafka's feature gate (see TestKcatCompression) kept it from
// compressing: then the subtest is skipped with the reason, since the
// records did arrive intact and the choice was the client's.
func kcatProduceCompressed(t *testing.T, n *node.Node, topic, codec string, attr uint8, gate string) {
	t.Helper()
	var in strings.Builder
	var want []string
	for i := range 50 {
		v := fmt.Sprintf("%s %03d %s", codec, i, strings.Repeat("compressible ", 10))
		in.WriteString(v + "\n")
		want = append(want, v)
	}
	runKcat(t, in.String(), "-P", "-b", n.KafkaAddr(), "-t", topic, "-z", codec, "-X", "acks=all", "-X", "linger.ms=50")

	got := consumeN(t, newConsumer(t, n, topic), len(want))
	for i, r := range got {
		if string(r.Value) != want[i] {
			t.Fatalf("kcat -z %s: record %d is %.30q..., want %.30q...", codec, i, r.Value, want[i])
		}
	}
	for i, r := range got {
		ct := r.Attrs.CompressionType()
		switch {
		case ct == attr:
		case ct == 0 && gate != "":
			t.Skipf("kcat -z %s: records round-tripped, but librdkafka sent them uncompressed: "+
				"it enables %s only when the broker advertises %s", codec, codec, gate)
		default:
			t.Fatalf("kcat -z %s: record %d fetched from a batch with compression %d, want %d", codec, i, ct, attr)
		}
	}
}
