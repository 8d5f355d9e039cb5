package main

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/wharf-mq/wharf/internal/kafka"
	"github.com/wharf-mq/wharf/internal/node"
	"github.com/wharf-mq/wharf/internal/nodetest"
)

// The cost of security, each listener beside PLAINTEXT in the same run:
//
//	go test -run '^$' -bench 'Secure|SCRAM' -benchtime 5s ./bench/
//
// BenchmarkSecureProduce/{PLAINTEXT,SSL,SASL_SSL}: one 1 KiB record
// produced with acks=all by franz-go (defaults), as
// BenchmarkProduceAcksAll1Partition/default, over each listener.
// BenchmarkSecureFetch/...: one 1 KiB record consumed by franz-go from a
// topic filled once; TLS turns sendfile off (the records are encrypted in
// user space), which is what it costs. BenchmarkSCRAMConnect/...: one new
// connection (TCP, TLS handshake for SASL_SSL, ApiVersions, SaslHandshake,
// the SCRAM-SHA-512 exchange at 4096 iterations) and one Metadata request;
// the client's PBKDF2 is most of it.

const (
	benchUser     = "bench"
	benchPassword = "bench-password"
)

// secureListeners are the listeners compared, PLAINTEXT first.
var secureListeners = []kafka.SecurityProtocol{kafka.Plaintext, kafka.SSL, kafka.SASLSSL}

// secureNode is a node with every listener, a PKI and a SCRAM user.
type secureNode struct {
	n   *node.Node
	pki *nodetest.PKI
}

func startSecureNode(b *testing.B) secureNode {
	b.Helper()
	pki := nodetest.NewPKI(b)
	n := nodetest.Start(b, nodetest.WithConfig(func(c *node.Config) {
		c.Logger = slog.New(slog.DiscardHandler)
		c.AMQPAddr, c.HTTPAddr = "", ""
		for _, p := range append(secureListeners, kafka.SASLPlaintext) {
			c.KafkaListeners = append(c.KafkaListeners, node.KafkaListener{Protocol: p, Addr: "127.0.0.1:0"})
		}
		c.Security.TLS = pki.ServerFiles(false)
	}))
	if err := n.Users().Put(benchUser, benchPassword, nil); err != nil {
		b.Fatal(err)
	}
	return secureNode{n: n, pki: pki}
}

// clientOpts connect a franz-go client to the listener p.
func (s secureNode) clientOpts(p kafka.SecurityProtocol) (addr string, opts []kgo.Opt) {
	if p.TLS() {
		opts = append(opts, kgo.DialTLSConfig(s.pki.ClientConfig("")))
	}
	if p.SASL() {
		opts = append(opts, kgo.SASL(scram.Auth{User: benchUser, Pass: benchPassword}.AsSha512Mechanism()))
	}
	return s.n.KafkaListenerAddr(p), opts
}

func BenchmarkSecureProduce(b *testing.B) {
	s := startSecureNode(b)
	w, err := attachWharf(s.n)
	if err != nil {
		b.Fatal(err)
	}
	defer w.closeAdmin()
	for _, p := range secureListeners {
		b.Run(string(p), func(b *testing.B) {
			topic := "secure-produce-" + string(p)
			if err := w.createTopic(topic, 1); err != nil {
				b.Fatal(err)
			}
			defer w.deleteTopic(topic)
			addr, opts := s.clientOpts(p)
			b.SetBytes(recordSize)
			r, _, err := produce(addr, topic, producerSetup{key: string(p), opts: opts}, forRecords(int64(b.N)), b.ResetTimer)
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(r.recordsPerSec(), "records/s")
		})
	}
}

// BenchmarkSecureFetch fills one topic (-bench.fill-mib) and reads it over
// each listener. (A benchmark with sub-benchmarks runs its body once.)
func BenchmarkSecureFetch(b *testing.B) {
	const topic = "secure-fetch"
	s := startSecureNode(b)
	w, err := attachWharf(s.n)
	if err != nil {
		b.Fatal(err)
	}
	defer w.closeAdmin()
	if err := w.createTopic(topic, 1); err != nil {
		b.Fatal(err)
	}
	if err := prefill(w.addr, topic, *benchFillMiB<<20); err != nil {
		b.Fatal(err)
	}
	ends, err := w.endOffsets(topic)
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range secureListeners {
		b.Run(string(p), func(b *testing.B) {
			addr, opts := s.clientOpts(p)
			b.SetBytes(recordSize)
			b.ResetTimer()
			r, err := fetch(addr, topic, ends, opts, forRecords(int64(b.N)))
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(r.recordsPerSec(), "records/s")
		})
	}
}

func BenchmarkSCRAMConnect(b *testing.B) {
	s := startSecureNode(b)
	for _, p := range []kafka.SecurityProtocol{kafka.SASLPlaintext, kafka.SASLSSL} {
		b.Run(string(p), func(b *testing.B) {
			addr, opts := s.clientOpts(p)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			b.ResetTimer()
			for range b.N {
				cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(addr))...)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); err != nil {
					b.Fatal(err)
				}
				cl.Close()
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "connections/s")
		})
	}
}
