package cluster

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The fault tests' load: three stock Kafka clients at once, each writing
// its own numbered stream into every partition of the topic with acks=all
// and recording in the ledger what was acknowledged.
//
//   - franz-go: idempotent (its default);
//   - sarama (IBM/sarama): idempotent, one request in flight per broker,
//     as sarama requires;
//   - kafka-go (segmentio): no idempotent producer exists in it, so a
//     retried batch may be written twice (counted as resent).
//
// A broker stopped with SIGSTOP accepts connections and answers nothing,
// so each client's request timeout bounds how long it waits before it
// re-routes: 2 s for the broker's acks=all wait plus 2 s on the wire,
// where Kafka's clients wait 30 s.
const (
	faultAckTimeout  = 2 * time.Second
	faultWireTimeout = 4 * time.Second
	// inFlightPerStream bounds the records a stream has handed to its
	// client and not yet seen answered.
	inFlightPerStream = 16
	// deliveryTimeout bounds how long a client tries to deliver a record
	// before it fails it: a cluster that never recovers fails the test
	// instead of hanging it.
	deliveryTimeout = 30 * time.Second
	// stopTimeout bounds how long one producer may take to stop: its last
	// records get deliveryTimeout to be answered, and some slack. A
	// producer still stopping then fails the test with every goroutine's
	// stack, instead of holding the package until go test's timeout.
	stopTimeout = deliveryTimeout + 15*time.Second
)

// producer is one client writing its streams until stopped.
type producer interface {
	// stop ends the load and returns once every record handed to the
	// client is answered (acknowledged or failed).
	stop()
}

// startProducers starts franz-go, sarama and kafka-go producers on every
// partition of topic and returns a function stopping them all.
func startProducers(ctx context.Context, t *testing.T, seeds []string, topic string, partitions int32, l *ledger) (stop func()) {
	t.Helper()
	ps := map[string]producer{
		"franz-go": startFranzProducer(ctx, t, seeds, topic, partitions, l),
		"sarama":   startSaramaProducer(ctx, t, seeds, topic, partitions, l),
		"kafka-go": startKafkaGoProducer(ctx, t, seeds, topic, partitions, l),
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			for _, name := range []string{"franz-go", "sarama", "kafka-go"} {
				stopWithin(t, name, ps[name], stopTimeout)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// stopWithin stops p, or fails the test with every goroutine's stack if
// that takes longer than limit; p's stop then goes on in the background
// until the test binary exits.
func stopWithin(t *testing.T, name string, p producer, limit time.Duration) {
	t.Helper()
	stopped := make(chan struct{})
	go func() {
		p.stop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(limit):
		stacks := make([]byte, 4<<20)
		stacks = stacks[:runtime.Stack(stacks, true)]
		t.Errorf("the %s producer did not stop within %v; every goroutine:\n%s", name, limit, stacks)
	}
}

// loop runs one goroutine per partition until stopped.
type loop struct {
	cancel context.CancelFunc
	done   sync.WaitGroup
}

func startLoop(ctx context.Context, partitions int32, each func(ctx context.Context, p int32)) *loop {
	ctx, cancel := context.WithCancel(ctx)
	l := &loop{cancel: cancel}
	for p := range partitions {
		l.done.Go(func() { each(ctx, p) })
	}
	return l
}

func (l *loop) stop() {
	l.cancel()
	l.done.Wait()
}

// franzProducer writes through one idempotent franz-go client.
type franzProducer struct {
	cl   *kgo.Client
	load *loop
}

func startFranzProducer(ctx context.Context, t *testing.T, seeds []string, topic string, partitions int32, l *ledger) producer {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0),
		kgo.ProduceRequestTimeout(faultAckTimeout), kgo.RequestTimeoutOverhead(faultWireTimeout-faultAckTimeout),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }), kgo.RecordDeliveryTimeout(deliveryTimeout),
		// franz-go refreshes metadata at most every 5 s by default; Kafka's
		// Java producer every 100 ms (retry.backoff.ms).
		kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	fp := &franzProducer{cl: cl}
	fp.load = startLoop(ctx, partitions, func(ctx context.Context, p int32) {
		k := l.open("franz", p, true)
		slots := make(chan struct{}, inFlightPerStream)
		var answered sync.WaitGroup
		defer answered.Wait()
		for {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			seq, v := l.next(k)
			answered.Add(1)
			// Not ctx: a record handed over is seen through to its answer.
			cl.Produce(context.WithoutCancel(ctx), &kgo.Record{Partition: p, Value: v}, func(_ *kgo.Record, err error) {
				defer answered.Done()
				<-slots
				if err == nil {
					l.ack(k, seq)
				}
			})
		}
	})
	return fp
}

func (fp *franzProducer) stop() {
	fp.load.stop()
	fp.cl.Close()
}

// saramaProducer writes through one idempotent sarama AsyncProducer.
type saramaProducer struct {
	t        *testing.T
	ctx      context.Context // the test's: its deadline bounds stop
	ap       sarama.AsyncProducer
	load     *loop
	answered sync.WaitGroup // the goroutine reading Successes and Errors
}

// saramaSeq is what a sarama message carries in its Metadata.
type saramaSeq struct {
	k    streamKey
	seq  int64
	slot chan struct{}
}

func startSaramaProducer(ctx context.Context, t *testing.T, seeds []string, topic string, partitions int32, l *ledger) producer {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Timeout = faultAckTimeout
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.Return.Successes = true
	cfg.Producer.Retry.Max, cfg.Producer.Retry.Backoff = int(deliveryTimeout/(50*time.Millisecond)), 50*time.Millisecond
	cfg.Metadata.Retry.Max, cfg.Metadata.Retry.Backoff = 1000, 50*time.Millisecond
	cfg.Net.MaxOpenRequests = 1
	cfg.Net.DialTimeout, cfg.Net.ReadTimeout, cfg.Net.WriteTimeout = faultWireTimeout, faultWireTimeout, faultWireTimeout
	var ap sarama.AsyncProducer
	var err error
	for { // the cluster may still be electing its leaders
		if ap, err = sarama.NewAsyncProducer(seeds, cfg); err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("sarama: %v", err)
	}
	sp := &saramaProducer{t: t, ctx: ctx, ap: ap}
	sp.answered.Go(func() {
		answer := func(m *sarama.ProducerMessage, err error) {
			s := m.Metadata.(saramaSeq)
			if err == nil {
				l.ack(s.k, s.seq)
			}
			<-s.slot
		}
		successes, failures := ap.Successes(), ap.Errors()
		for successes != nil || failures != nil {
			select {
			case m, ok := <-successes:
				if !ok {
					successes = nil
					continue
				}
				answer(m, nil)
			case e, ok := <-failures:
				if !ok {
					failures = nil
					continue
				}
				answer(e.Msg, e.Err)
			}
		}
	})
	sp.load = startLoop(ctx, partitions, func(ctx context.Context, p int32) {
		k := l.open("sarama", p, true)
		slots := make(chan struct{}, inFlightPerStream)
		defer func() { // wait for every answer
			for range inFlightPerStream {
				slots <- struct{}{}
			}
		}()
		for {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			seq, v := l.next(k)
			select {
			case ap.Input() <- &sarama.ProducerMessage{Topic: topic, Partition: p, Value: sarama.ByteEncoder(v),
				Metadata: saramaSeq{k, seq, slots}}:
			case <-ctx.Done():
				<-slots
				return
			}
		}
	})
	return sp
}

// stop waits for every record's answer until the test's deadline.
// sarama has no delivery timeout: a record is retried Retry.Max times,
// and each retry may wait for a metadata refresh of up to
// Metadata.Retry.Max attempts, so a record of a stalled client can go
// unanswered far past the test's end. Past its deadline the test fails
// rather than hang, and leaves sarama to its retries.
func (sp *saramaProducer) stop() {
	loadStopped := make(chan struct{})
	go func() { // ends when sarama answers its last record
		sp.load.stop()
		close(loadStopped)
	}()
	select {
	case <-loadStopped:
	case <-sp.ctx.Done():
		select {
		case <-loadStopped:
		default:
			sp.t.Errorf("sarama: records still unanswered at the test's deadline (%v); its producer is left running", context.Cause(sp.ctx))
			return
		}
	}
	sp.ap.AsyncClose()
	sp.answered.Wait()
}

// kafkaGoProducer writes through one kafka-go Writer, small synchronous
// batches per partition.
type kafkaGoProducer struct {
	w    *kafkago.Writer
	load *loop
}

func startKafkaGoProducer(ctx context.Context, t *testing.T, seeds []string, topic string, partitions int32, l *ledger) producer {
	t.Helper()
	w := &kafkago.Writer{
		Addr:  kafkago.TCP(seeds...),
		Topic: topic,
		// Each message names its partition.
		Balancer:     kafkago.BalancerFunc(func(m kafkago.Message, _ ...int) int { return m.Partition }),
		RequiredAcks: kafkago.RequireAll,
		BatchTimeout: time.Millisecond,
		MaxAttempts:  1000, WriteBackoffMin: 20 * time.Millisecond, WriteBackoffMax: 100 * time.Millisecond,
		ReadTimeout: faultWireTimeout, WriteTimeout: faultWireTimeout,
		// kafka-go caches the metadata for 6 s by default.
		Transport: &kafkago.Transport{MetadataTTL: 500 * time.Millisecond, DialTimeout: faultWireTimeout},
	}
	kp := &kafkaGoProducer{w: w}
	kp.load = startLoop(ctx, partitions, func(ctx context.Context, p int32) {
		k := l.open("kafkago", p, false)
		for ctx.Err() == nil {
			msgs := make([]kafkago.Message, 8)
			seqs := make([]int64, len(msgs))
			for i := range msgs {
				seqs[i], msgs[i].Value = l.next(k)
				msgs[i].Partition = int(p)
			}
			deliver, cancel := context.WithTimeout(context.WithoutCancel(ctx), deliveryTimeout)
			err := w.WriteMessages(deliver, msgs...)
			cancel()
			var perMessage kafkago.WriteErrors
			for i, seq := range seqs {
				if err == nil || (errors.As(err, &perMessage) && perMessage[i] == nil) {
					l.ack(k, seq)
				}
			}
		}
	})
	return kp
}

func (kp *kafkaGoProducer) stop() {
	kp.load.stop()
	kp.w.Close()
}
