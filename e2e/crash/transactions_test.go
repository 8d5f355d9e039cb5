package crash

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCrashTransactionsExactlyOnce is the consume–transform–produce proof
// of exactly-once: transformers using franz-go's GroupTransactSession read
// an input topic in a consumer group, write one output record per input
// record and commit the input offsets in the same transaction. The broker
// is killed (SIGKILL) and restarted several times while they run; the
// transformers ride through on the same clients where they can and start
// a new session (same transactional id, which fences the old one and
// aborts what it left open) where franz-go gives up. At the end the output
// topic read with read_committed must hold each input record exactly once:
// missing = duplicated = unexpected = 0.
//
// The input is produced up front, before the first kill; the transformers
// are paced (txnBatch records per transaction, one record per recordPace)
// so that every kill lands mid-run, usually mid-transaction. A transaction
// open at the kill may well commit after the restart: its state is durable.
func TestCrashTransactionsExactlyOnce(t *testing.T) {
	h := newHarness(t)
	b := h.start()
	adm := newAdmin(t, b.addr)
	const (
		input  = "eos-input"
		output = "eos-output"
		group  = "eos-transformers"
	)
	inputRecords := 2500 * (*cycles + 1)
	createTopic(t, adm, input, topicPartitions)
	createTopic(t, adm, output, topicPartitions)
	produceInput(t, b.addr, input, inputRecords)

	tr := startTransformers(t, b.addr, input, output, group, 2)
	defer tr.stop()
	for cycle := 1; cycle <= *cycles; cycle++ {
		// Kill only once the transformers commit again (after a restart
		// they rejoin the group first), so that each kill lands in the
		// middle of their work.
		resumedIn := tr.waitProgress(t, 30*time.Second)
		runFor := h.loadDuration(300*time.Millisecond, 1500*time.Millisecond)
		before := tr.committedRecords.Load()
		time.Sleep(runFor) // the run itself: how long the broker serves before the kill
		open := tr.inTxn.Load()
		b.kill()
		t.Logf("cycle %d: transformers committing %v after the start; ran %v more, %d records committed in it (%d so far of %d); killed with %d transactions open",
			cycle, resumedIn.Round(time.Millisecond), runFor.Round(time.Millisecond), tr.committedRecords.Load()-before, tr.committedRecords.Load(), inputRecords, open)
		b = h.restartAt(b.addr)
	}
	adm = newAdmin(t, b.addr)

	// The transformers finish the input on the last broker; then every
	// input offset is committed by the group.
	waitGroupCaughtUp(t, adm, group, input, 60*time.Second)
	tr.stop()
	t.Logf("transformers: %d transactions committed, %d aborted or failed, %d new sessions after franz-go gave up",
		tr.commits.Load(), tr.aborts.Load(), tr.restarts.Load())

	committed := readAllValues(t, b.addr, output, true)
	uncommitted := readAllValues(t, b.addr, output, false)
	v := judgeExactlyOnce(inputRecords, committed)
	t.Logf("output read_committed: %s; read_uncommitted holds %d records (%d of aborted transactions)",
		v, len(uncommitted), len(uncommitted)-len(committed))
	if !v.ok() {
		t.Fatalf("output is not exactly-once: %s (examples: %v)", v, v.examples)
	}
	b.stop()
	h.checkNoRaceReports()
}

// restartAt starts a broker on the harness's data directory on the given
// Kafka address: clients that outlive the kill (the transformers) find the
// restarted broker where they left it, as they would a real one.
func (h *harness) restartAt(addr string) *broker {
	h.t.Helper()
	h.starts++
	logPath := filepath.Join(h.workDir, fmt.Sprintf("broker-%03d.log", h.starts))
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		h.t.Fatalf("open broker log: %v", err)
	}
	defer logFile.Close() // the child has its own copy
	cmd := exec.Command(h.bin, "serve", "--data-dir", h.dataDir, "--kafka-addr", addr,
		"--amqp-addr=", "--http-addr=", "--nats-addr=", "--log-level", "info")
	cmd.Env = environWithoutWharf()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		h.t.Fatalf("start wharf: %v", err)
	}
	b := &broker{t: h.t, addr: addr, logPath: logPath, cmd: cmd, exited: make(chan struct{})}
	go func() { // ends with the process; the cleanup below makes sure it does
		b.waitErr = cmd.Wait()
		close(b.exited)
	}()
	h.t.Cleanup(func() {
		if b.running() {
			_ = b.cmd.Process.Kill()
			<-b.exited
		}
	})
	b.waitReady()
	h.brokers = append(h.brokers, b)
	return b
}

// txnBatch and recordPace bound a transformer's speed: at most txnBatch
// records per transaction, produced one per recordPace, so that a
// transaction is open most of the time and a kill usually lands in one.
const (
	txnBatch   = 20
	recordPace = time.Millisecond
)

func inputValue(i int) string { return "in-" + strconv.Itoa(i) }

// outputValue is the transform: the input's number under another prefix.
func outputValue(in string) string { return "out-" + strings.TrimPrefix(in, "in-") }

// produceInput writes n input records (acks=all, idempotent) and waits for
// all of them.
func produceInput(t *testing.T, addr, topic string, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatalf("input producer: %v", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Key: []byte(recordKey(int64(i))), Value: []byte(inputValue(i))}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce input: %v", err)
	}
}

// transformers is a set of consume–transform–produce loops, one
// GroupTransactSession (own transactional id, same group) per loop.
type transformers struct {
	t      *testing.T
	cancel context.CancelFunc
	loops  sync.WaitGroup
	once   sync.Once

	committedRecords atomic.Int64 // input records in committed transactions
	commits          atomic.Int64
	aborts           atomic.Int64
	restarts         atomic.Int64
	inTxn            atomic.Int64 // transactions begun and not yet ended

	errMu  sync.Mutex
	errors map[string]int // by text, for the log
}

func startTransformers(t *testing.T, addr, input, output, group string, n int) *transformers {
	ctx, cancel := context.WithCancel(context.Background())
	tr := &transformers{t: t, cancel: cancel, errors: map[string]int{}}
	for i := range n {
		tr.loops.Add(1)
		go tr.run(ctx, addr, input, output, group, fmt.Sprintf("eos-transformer-%d", i))
	}
	return tr
}

// waitProgress waits until some transformer commits a transaction and
// returns how long that took.
func (tr *transformers) waitProgress(t *testing.T, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	from := tr.commits.Load()
	poll := time.NewTicker(10 * time.Millisecond)
	defer poll.Stop()
	for tr.commits.Load() == from {
		if time.Since(start) > limit {
			t.Fatalf("no transaction committed within %v of the broker start", limit)
		}
		<-poll.C
	}
	return time.Since(start)
}

// stop ends the loops and waits for them; it logs the errors they met.
func (tr *transformers) stop() {
	tr.once.Do(func() {
		tr.cancel()
		tr.loops.Wait()
		tr.errMu.Lock()
		defer tr.errMu.Unlock()
		if len(tr.errors) > 0 {
			tr.t.Logf("transformer errors (expected around kills): %v", tr.errors)
		}
	})
}

func (tr *transformers) noteErr(what string, err error) {
	tr.errMu.Lock()
	tr.errors[what+": "+err.Error()]++
	tr.errMu.Unlock()
}

// run is one transformer: sessions until ctx ends, a new one whenever
// franz-go reports the old one unusable.
func (tr *transformers) run(ctx context.Context, addr, input, output, group, txnID string) {
	defer tr.loops.Done()
	for ctx.Err() == nil {
		sess, err := kgo.NewGroupTransactSession(
			kgo.SeedBrokers(addr),
			kgo.TransactionalID(txnID),
			kgo.TransactionTimeout(10*time.Second),
			kgo.ConsumerGroup(group),
			kgo.ConsumeTopics(input),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.RequireStableFetchOffsets(),
			kgo.SessionTimeout(6*time.Second),
			kgo.RebalanceTimeout(10*time.Second),
			kgo.HeartbeatInterval(500*time.Millisecond),
			kgo.DefaultProduceTopic(output),
			kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.RetryTimeout(15*time.Second),
		)
		if err != nil {
			tr.noteErr("new session", err)
			return
		}
		tr.session(ctx, sess)
		sess.Close()
		if ctx.Err() == nil {
			tr.restarts.Add(1)
		}
	}
}

// session runs transactions on sess until ctx ends or one fails in a way
// franz-go says not to continue from.
func (tr *transformers) session(ctx context.Context, sess *kgo.GroupTransactSession) {
	pace := time.NewTicker(recordPace)
	defer pace.Stop()
	for ctx.Err() == nil {
		pollCtx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		fs := sess.PollRecords(pollCtx, txnBatch)
		cancel()
		if ctx.Err() != nil {
			return
		}
		for _, fe := range fs.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) {
				tr.noteErr("poll", fe.Err)
			}
		}
		if fs.NumRecords() == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			tr.noteErr("begin", err)
			return
		}
		tr.inTxn.Add(1)
		var produceFailed atomic.Bool
		n := 0
		for _, r := range fs.Records() {
			select {
			case <-ctx.Done():
				return // the session is closed with its transaction open
			case <-pace.C:
			}
			n++
			out := &kgo.Record{Key: r.Key, Value: []byte(outputValue(string(r.Value)))}
			sess.Produce(ctx, out, func(_ *kgo.Record, err error) {
				if err != nil {
					produceFailed.Store(true)
					tr.noteErr("produce", err)
				}
			})
		}
		committed, err := sess.End(ctx, kgo.TransactionEndTry(!produceFailed.Load()))
		tr.inTxn.Add(-1)
		switch {
		case committed:
			tr.commits.Add(1)
			tr.committedRecords.Add(int64(n))
		default:
			tr.aborts.Add(1)
		}
		if err != nil {
			if ctx.Err() == nil {
				tr.noteErr("end", err)
			}
			return
		}
	}
}

// waitGroupCaughtUp waits until the group has committed every input
// offset: the transformers have consumed the whole input in committed
// transactions.
func waitGroupCaughtUp(t *testing.T, adm *kadm.Client, group, topic string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	var lag int64
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ends, err1 := adm.ListEndOffsets(ctx, topic)
		offs, err2 := adm.FetchOffsets(ctx, group)
		cancel()
		if err1 == nil && err2 == nil {
			lag = 0
			ends.Each(func(o kadm.ListedOffset) {
				c, ok := offs.Lookup(topic, o.Partition)
				if !ok {
					lag += o.Offset
				} else if c.At < o.Offset {
					lag += o.Offset - c.At
				}
			})
			if lag == 0 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the transformers did not catch up within %v: lag %d (errors %v, %v)", limit, lag, err1, err2)
		}
		<-poll.C
	}
}

// readAllValues reads every record of topic from the start with the given
// isolation level. The topic no longer changes, so the reader is at the end
// once its fetches stay empty: the client fetches ahead continuously, and
// a quiet second twice in a row means nothing is left (a read_committed
// reader skips markers and aborted batches without showing their offsets,
// so offsets cannot tell).
func readAllValues(t *testing.T, addr string, topic string, committed bool) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	level := kgo.ReadUncommitted()
	if committed {
		level = kgo.ReadCommitted()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(level),
		kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatalf("reader: %v", err)
	}
	defer cl.Close()
	var out []string
	for quiet := 0; quiet < 2; {
		pollCtx, cancelPoll := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pollCtx)
		cancelPoll()
		if ctx.Err() != nil {
			t.Fatalf("reading %s (read_committed=%v): %v; got %d records", topic, committed, ctx.Err(), len(out))
		}
		for _, fe := range fs.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) {
				t.Fatalf("fetch %s[%d]: %v", fe.Topic, fe.Partition, fe.Err)
			}
		}
		if fs.NumRecords() == 0 {
			quiet++
			continue
		}
		quiet = 0
		fs.EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)) })
	}
	return out
}

// eosVerdict counts how the committed output differs from exactly one
// output record per input record.
type eosVerdict struct {
	distinct, missing, duplicated, unexpected int
	examples                                  []string
}

func (v eosVerdict) String() string {
	return fmt.Sprintf("distinct=%d missing=%d duplicated=%d unexpected=%d", v.distinct, v.missing, v.duplicated, v.unexpected)
}

func (v eosVerdict) ok() bool { return v.missing == 0 && v.duplicated == 0 && v.unexpected == 0 }

func judgeExactlyOnce(inputRecords int, values []string) eosVerdict {
	var v eosVerdict
	seen := make(map[int]int, inputRecords)
	note := func(ex string) {
		if len(v.examples) < 10 {
			v.examples = append(v.examples, ex)
		}
	}
	for _, val := range values {
		i, err := strconv.Atoi(strings.TrimPrefix(val, "out-"))
		if err != nil || !strings.HasPrefix(val, "out-") || i < 0 || i >= inputRecords {
			v.unexpected++
			note("unexpected " + val)
			continue
		}
		seen[i]++
		if seen[i] == 2 {
			v.duplicated++
			note("duplicated " + val)
		}
	}
	v.distinct = len(seen)
	for i := range inputRecords {
		if seen[i] == 0 {
			v.missing++
			note("missing " + outputValue(inputValue(i)))
		}
	}
	return v
}
