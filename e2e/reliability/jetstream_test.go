package reliability

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/wharf-mq/wharf/internal/node"
	"github.com/wharf-mq/wharf/internal/nodetest"
	"github.com/wharf-mq/wharf/internal/seglog"
)

// jsAPISubjects are the JetStream API operations the bad-input test sends
// garbage to, with the names of a stream and consumer that exist.
var jsAPISubjects = []string{
	"$JS.API.INFO", "$JS.API.STREAM.CREATE.S", "$JS.API.STREAM.UPDATE.S", "$JS.API.STREAM.INFO.S",
	"$JS.API.STREAM.NAMES", "$JS.API.STREAM.LIST", "$JS.API.STREAM.PURGE.OTHER", "$JS.API.STREAM.MSG.GET.S",
	"$JS.API.STREAM.MSG.DELETE.OTHER", "$JS.API.DIRECT.GET.S", "$JS.API.CONSUMER.CREATE.S",
	"$JS.API.CONSUMER.CREATE.S.C", "$JS.API.CONSUMER.DURABLE.CREATE.S.C", "$JS.API.CONSUMER.NAMES.S",
	"$JS.API.CONSUMER.LIST.S", "$JS.API.CONSUMER.INFO.S.C", "$JS.API.CONSUMER.MSG.NEXT.S.C",
	"$JS.ACK.S.C.1.1.1.1.1", "$JS.ACK.S.C.x.y", "$JS.API.STREAM.SNAPSHOT.S", "$JS.API.NO.SUCH.THING",
}

// TestJetStreamBadInput throws garbage at a node's JetStream API (random
// bytes and random JSON-ish bodies to every operation, acknowledgements
// with nonsense tokens), then floods a consumer with pull requests from
// clients that leave, and leaves ephemeral consumers behind. The node must
// answer every request it answers with an error of nats-server's shape,
// keep its stream and consumer intact, bound what it keeps (a consumer's
// waiting requests at max_waiting, inactive consumers deleted), and its
// heap must come back near where it was.
func TestJetStreamBadInput(t *testing.T) {
	rng := newRand(t)
	n := nodetest.Start(t, newNodeLog(t, slog.LevelError).option(), nodetest.WithConfig(func(c *node.Config) { c.NATSAddr = "127.0.0.1:0" }))
	url := "nats://" + n.NATSAddr()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if _, err := js.Publish(ctx, fmt.Sprintf("s.%d", i%7), []byte("payload")); err != nil {
			t.Fatal(err)
		}
	}
	c, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "C", AckPolicy: jetstream.AckExplicitPolicy, MaxWaiting: 64})
	if err != nil {
		t.Fatal(err)
	}
	heapBefore := heapInUse()

	// Garbage to every operation: whatever answer comes must be JSON
	// with an error or a status message, never a crash.
	answers, garbage := 0, *badRoundsFlag*1000
	for i := range garbage {
		subj := jsAPISubjects[rng.IntN(len(jsAPISubjects))]
		m, err := nc.Request(subj, randomBody(rng), 100*time.Millisecond)
		if err != nil {
			continue // no answer: nats-server answers none either to some garbage (an unknown operation, an ack)
		}
		answers++
		delivery := strings.HasPrefix(m.Subject, "s.") // a pull request's message, or a direct get's
		ackAnswer := strings.HasPrefix(subj, "$JS.ACK.") && len(m.Data) == 0
		if m.Header.Get("Status") == "" && !delivery && !ackAnswer && (len(m.Data) == 0 || m.Data[0] != '{') {
			t.Errorf("request %d to %s: an answer that is neither JSON, nor a status, nor a message: %q", i, subj, m.Data)
		}
	}
	t.Logf("%d garbage requests, %d answered", garbage, answers)

	// Pull requests from clients that leave: the consumer keeps at most
	// max_waiting, and drops those of clients gone.
	for range 10 {
		flood, err := nats.Connect(url)
		if err != nil {
			t.Fatal(err)
		}
		inbox := nats.NewInbox()
		if _, err := flood.SubscribeSync(inbox); err != nil {
			t.Fatal(err)
		}
		for range 500 {
			flood.PublishRequest("$JS.API.CONSUMER.MSG.NEXT.S.C", inbox, []byte(`{"batch":1000,"expires":600000000000}`))
		}
		flood.Flush()
		flood.Close()
	}
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumWaiting > 64 {
		t.Errorf("%d pull requests waiting, max_waiting is 64", info.NumWaiting)
	}

	// Ephemeral consumers left behind go after their inactive threshold.
	for i := range 200 {
		if _, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Name: fmt.Sprintf("e%d", i), InactiveThreshold: time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		si, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if si.State.Consumers == 1 { // C
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d consumers 15 s after 200 ephemeral ones were left with a 1 s inactive threshold", si.State.Consumers)
		}
		time.Sleep(100 * time.Millisecond) // polling the node's state, which changes on its own clock
	}

	// The stream is intact and serves (through a new consumer: the
	// garbage's pull requests took C's messages, which wait for their
	// ack wait), and C takes pull requests again.
	si, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if si.State.Msgs != 100 || si.State.LastSeq != 100 {
		t.Errorf("stream state after the garbage: %+v", si.State)
	}
	if _, err := c.FetchNoWait(1); err != nil {
		t.Errorf("a pull request after the flood: %v", err)
	}
	fresh, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "D", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := fresh.Fetch(100, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for m := range batch.Messages() {
		m.Ack()
		got++
	}
	if got != 100 {
		t.Errorf("the consumer delivered %d of 100 messages after the garbage (%v)", got, batch.Error())
	}
	if grown := int64(heapInUse()) - int64(heapBefore); grown > 64<<20 {
		t.Errorf("heap grew by %d MiB over the garbage", grown>>20)
	}
}

// randomBody is garbage for a request: random bytes, JSON with random
// values, or a number.
func randomBody(rng *rand.Rand) []byte {
	switch rng.IntN(4) {
	case 0:
		b := make([]byte, rng.IntN(512))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return b
	case 1:
		keys := []string{"name", "subjects", "config", "batch", "expires", "seq", "keep", "filter", "max_msgs",
			"durable_name", "deliver_policy", "ack_policy", "stream_name", "last_by_subj", "max_bytes", "no_wait"}
		values := []string{`-1`, `0`, `18446744073709551615`, `"x"`, `null`, `[]`, `{}`, `true`, `1e300`, `"\u0000"`, `"S"`, `["s.>"]`}
		body := "{"
		for i := range rng.IntN(6) {
			if i > 0 {
				body += ","
			}
			body += fmt.Sprintf("%q:%s", keys[rng.IntN(len(keys))], values[rng.IntN(len(values))])
		}
		return []byte(body + "}")
	case 2:
		return []byte(fmt.Sprint(rng.Int64() - rng.Int64()))
	}
	return nil
}

// A stream whose log cannot be read (its segment replaced by a directory,
// as TestUnreadablePartitionThroughTheNode does to a Kafka partition)
// does not stop the node: it is offline, with nats-server's "stream is
// offline" error naming why, its subjects stay taken, it can be deleted,
// and the other streams serve.
func TestJetStreamOfflineStream(t *testing.T) {
	dataDir := t.TempDir()
	withNATS := nodetest.WithConfig(func(c *node.Config) { c.NATSAddr = "127.0.0.1:0" })
	n := nodetest.Start(t, nodetest.WithDataDir(dataDir), withNATS, newNodeLog(t, slog.LevelWarn).option())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	js := jsClient(t, n)
	for _, name := range []string{"DAMAGED", "HEALTHY"} {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{strings.ToLower(name) + ".>"}}); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if _, err := js.Publish(ctx, strings.ToLower(name)+".x", []byte("data")); err != nil {
				t.Fatal(err)
			}
		}
	}
	closeNode(t, n)

	seg := filepath.Join(dataDir, "js.DAMAGED-0", fmt.Sprintf("%020d.log", 0))
	if err := os.Remove(seg); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(seg, 0o755); err != nil {
		t.Fatal(err)
	}
	n = nodetest.Start(t, nodetest.WithDataDir(dataDir), withNATS, newNodeLog(t, slog.LevelWarn).option())
	js = jsClient(t, n)
	_, err := js.Stream(ctx, "DAMAGED")
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != 10194 || !strings.Contains(apiErr.Description, "stream is offline") {
		t.Errorf("info of the damaged stream: %v", err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "OTHER", Subjects: []string{"damaged.x"}}); err == nil {
		t.Error("a new stream took the offline stream's subjects")
	}
	healthy, err := js.Stream(ctx, "HEALTHY")
	if err != nil {
		t.Fatal(err)
	}
	if ack, err := js.Publish(ctx, "healthy.x", []byte("more")); err != nil || ack.Sequence != 4 {
		t.Errorf("publish to the healthy stream: %+v %v", ack, err)
	}
	if info, err := healthy.Info(ctx); err != nil || info.State.Msgs != 4 {
		t.Errorf("healthy stream: %+v %v", info, err)
	}
	if err := js.DeleteStream(ctx, "DAMAGED"); err != nil {
		t.Fatalf("delete the offline stream: %v", err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "DAMAGED", Subjects: []string{"damaged.>"}}); err != nil {
		t.Errorf("create the stream again after deleting the offline one: %v", err)
	}
}

func jsClient(t *testing.T, n *node.Node) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect("nats://" + n.NATSAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// A stream whose log fails an fsync acknowledges nothing more: the publish
// it could not commit gets nats-server's "store failed" error (10077), so
// does its retry with the same Nats-Msg-Id (the message is in the
// duplicate window, but not on disk), and every later publish; the other
// streams go on acknowledging.
func TestJetStreamFailedFsyncAcknowledgesNothing(t *testing.T) {
	// Not nodetest's node: its Close reports the failed log, rightly.
	cfg := node.Config{DataDir: t.TempDir(), KafkaAddr: "127.0.0.1:0", NATSAddr: "127.0.0.1:0"}
	newNodeLog(t, slog.LevelError).option()(&cfg)
	n, err := node.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	defer func() {
		if err := n.Close(ctx); err == nil || !strings.Contains(err.Error(), "js.FAILING-0") {
			t.Errorf("close: %v, want the failed log's error", err)
		}
	}()
	js := jsClient(t, n)
	for _, name := range []string{"FAILING", "HEALTHY"} {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{strings.ToLower(name) + ".>"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := js.Publish(ctx, strings.ToLower(name)+".x", []byte("before")); err != nil {
			t.Fatal(err)
		}
	}
	failing := string(filepath.Separator) + "js.FAILING-0" + string(filepath.Separator)
	t.Cleanup(seglog.SetSyncFault(func(path string) error {
		if strings.Contains(path+string(filepath.Separator), failing) {
			return syscall.EIO
		}
		return nil
	}))

	storeFailed := func(what string, err error) {
		t.Helper()
		var apiErr *jetstream.APIError
		if !errors.As(err, &apiErr) || apiErr.ErrorCode != 10077 {
			t.Errorf("%s: %v, want the store failed error (10077)", what, err)
		}
	}
	ack, err := js.Publish(ctx, "failing.x", []byte("lost"), jetstream.WithMsgID("m1"))
	storeFailed(fmt.Sprintf("publish whose fsync fails (ack %+v)", ack), err)
	ack, err = js.Publish(ctx, "failing.x", []byte("lost"), jetstream.WithMsgID("m1"))
	storeFailed(fmt.Sprintf("its retry (ack %+v)", ack), err)
	ack, err = js.Publish(ctx, "failing.x", []byte("later"))
	storeFailed(fmt.Sprintf("a later publish (ack %+v)", ack), err)
	if ack, err := js.Publish(ctx, "healthy.x", []byte("after")); err != nil || ack.Sequence != 2 {
		t.Errorf("publish to the healthy stream: %+v %v", ack, err)
	}
}
