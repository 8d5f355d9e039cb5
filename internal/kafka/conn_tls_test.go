package kafka

import (
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wharf-mq/wharf/internal/tlsconf/tlstest"
)

// serveSSL serves ts on an SSL listener over ln and returns a client
// configuration that trusts it.
func serveSSL(t testing.TB, ts *testServer, ln net.Listener) (clientTLS *tls.Config) {
	t.Helper()
	serverTLS, clientTLS := tlstest.SelfSigned(t)
	port := int32(ln.Addr().(*net.TCPAddr).Port)
	go ts.s.ServeListener(ln, Listener{Protocol: SSL, AdvertisedHost: "127.0.0.1", AdvertisedPort: port, TLS: serverTLS})
	return clientTLS
}

// consumeValues reads n records from the start of topic and returns their
// values, in order.
func consumeValues(t *testing.T, topic string, n int, opts ...kgo.Opt) []string {
	t.Helper()
	cl, err := kgo.NewClient(append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []string
	ctx := testCtx(t)
	for len(got) < n {
		fetches := cl.PollFetches(ctx)
		if err := fetches.Err(); err != nil {
			t.Fatal(err)
		}
		for _, r := range fetches.Records() {
			got = append(got, string(r.Value))
		}
	}
	return got
}

// checkValues fails t unless got is want.
func checkValues(t *testing.T, got, want []string) {
	t.Helper()
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("record %d is %.10q..., want %.10q...", i, got[i], want[i])
		}
	}
}

// TestFetchOverTLSStreamsRecordData: record data too large for the copy
// path goes through the encryption straight from the files and arrives
// whole and in order.
func TestFetchOverTLSStreamsRecordData(t *testing.T) {
	ts := startServer(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	clientTLS := serveSSL(t, ts, ln)
	ts.createTopic(t, "sealed", 1, nil)

	const n = 300
	var values []string
	for i := range n {
		values = append(values, fmt.Sprintf("%04d-%01000d", i, i))
	}
	produceSync(t, ts.client(t), "sealed", 0, values...)
	checkValues(t, consumeValues(t, "sealed", n, kgo.SeedBrokers(ln.Addr().String()), kgo.DialTLSConfig(clientTLS)), values)
}

// TestTLSFetchWritesRecordsInLargeSocketWrites: over TLS the broker
// writes a fetch response's records several per write (seven: see
// tlsconf's batchSize), not one system call (and on loopback one trip
// through the peer's TCP stack) per 16 KiB record. (tlsconf's tests show
// its reads taking several records at once.) One write per record cost a
// fetch over SSL about 3.5 times the broker's CPU per MB of one over
// PLAINTEXT.
func TestTLSFetchWritesRecordsInLargeSocketWrites(t *testing.T) {
	ts := startServer(t)
	ln, socketIO := tlstest.Listen(t)
	clientTLS := serveSSL(t, ts, ln)
	ts.createTopic(t, "bulk", 1, nil)
	addr := kgo.SeedBrokers(ln.Addr().String())

	const n = 256 // 4 MiB of 16 KiB records
	var values []string
	for i := range n {
		values = append(values, fmt.Sprintf("%04d-%016379d", i, i))
	}
	producer, err := kgo.NewClient(addr, kgo.DialTLSConfig(clientTLS.Clone()),
		kgo.ProducerBatchCompression(kgo.NoCompression())) // the bytes sent are the records
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	produceSync(t, producer, "bulk", 0, values...)
	checkValues(t, consumeValues(t, "bulk", n, addr, kgo.DialTLSConfig(clientTLS.Clone())), values)

	if total, inLarge := socketIO.WrittenInWritesOver(6 * tlstest.MaxRecord); inLarge < total*9/10 {
		t.Fatalf("of %d bytes written, %d went in writes of more than six TLS records; want 90%%", total, inLarge)
	}
}

// TestLargeTLSFetchArrivesIntact: fetch responses of several partitions,
// each partition's record data spanning segment files (each mapped on its
// own) and several of the Socket's writes, reach a franz-go consumer over
// SSL byte for byte and in order.
func TestLargeTLSFetchArrivesIntact(t *testing.T) {
	ts := startServer(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	clientTLS := serveSSL(t, ts, ln)
	const partitions, perPartition = 3, 250 // about 1.4 MiB a partition, in three segments
	ts.createTopic(t, "large", partitions, map[string]string{"segment.bytes": strconv.Itoa(600 << 10)})
	producer := ts.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(256<<10))
	rng := rand.New(rand.NewPCG(1, 2))
	want := make([][]string, partitions)
	for p := range want {
		for i := range perPartition {
			v := make([]byte, 500+rng.IntN(4500)) // sizes that fit no piece or segment evenly
			for j := range v {
				v[j] = byte(rng.Uint32())
			}
			want[p] = append(want[p], fmt.Sprintf("%d-%d-%x", p, i, v))
		}
		produceSync(t, producer, "large", int32(p), want[p]...)
	}

	consumer, err := kgo.NewClient(kgo.SeedBrokers(ln.Addr().String()), kgo.DialTLSConfig(clientTLS),
		kgo.ConsumeTopics("large"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	got := make([][]string, partitions)
	ctx := testCtx(t)
	for n := 0; n < partitions*perPartition; {
		fetches := consumer.PollFetches(ctx)
		if err := fetches.Err(); err != nil {
			t.Fatal(err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], string(r.Value))
			n++
		})
	}
	for p := range want {
		if len(got[p]) != perPartition {
			t.Fatalf("partition %d: %d records, want %d", p, len(got[p]), perPartition)
		}
		checkValues(t, got[p], want[p])
	}
}

// TestTLSFetchEncryptsThePageCache: over TLS a fetch's record data is
// encrypted straight from the segment files' pages (a mapping of them),
// not first read into the broker's memory: while a consumer fetches 8
// MiB over SSL, the process (broker and consumer) reads with read(2) and
// pread(2) about the consumer's own share of the socket, not that and
// the 8 MiB from the files again.
func TestTLSFetchEncryptsThePageCache(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("segment files are mapped on Linux only")
	}
	ts := startServer(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	clientTLS := serveSSL(t, ts, ln)
	ts.createTopic(t, "mapped", 1, nil)
	const n, size = 512, 16 << 10 // 8 MiB
	var values []string
	for i := range n {
		values = append(values, fmt.Sprintf("%04d-%0*d", i, size-5, i))
	}
	produceSync(t, ts.client(t, kgo.ProducerBatchCompression(kgo.NoCompression())), "mapped", 0, values...)

	before := bytesRead(t)
	checkValues(t, consumeValues(t, "mapped", n, kgo.SeedBrokers(ln.Addr().String()), kgo.DialTLSConfig(clientTLS)), values)
	if read := bytesRead(t) - before; read > n*size*3/2 {
		t.Fatalf("the process read %d bytes to fetch %d bytes of records over TLS; want the consumer's %d and little more", read, n*size, n*size)
	}
}

// bytesRead is how many bytes the process has read with read(2) and
// its kin (rchar in /proc/self/io), from files and sockets alike.
func bytesRead(t *testing.T) int {
	t.Helper()
	stats, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Skip("no /proc/self/io:", err)
	}
	for line := range strings.Lines(string(stats)) {
		if v, ok := strings.CutPrefix(line, "rchar: "); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no rchar in /proc/self/io")
	return 0
}
