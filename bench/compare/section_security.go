package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// The cost of TLS (issue 15: less than 30 % of PLAINTEXT's throughput for
// 1 KiB records). One Wharf process serves the same data on three Kafka
// listeners; every row compares a secured listener (the "Wharf" column)
// with PLAINTEXT on the same process (the "peer" column), run after run.
// Client and broker share the machine's cores, so the notes give each
// side's CPU per MB of records: the broker's is Wharf's cost, the client's
// (franz-go's TLS) is not, and the note says which share of what TLS adds
// is the client's. The consume rows compare unlike paths on purpose, as
// a Kafka user meets them: PLAINTEXT sends record data from the page
// cache with sendfile, without copying it, while TLS must encrypt it in
// the broker, from a mapping of the segment files (the kernel's TLS is not
// in Go's standard library). Both sides use franz-go's default fetch sizes (1 MiB a
// partition, Kafka's max.partition.fetch.bytes).

const (
	securityUser     = "bench"
	securityPassword = "bench-password"
	// securityFillBytes is the size of the topic the consume rows read,
	// from its start, again and again: large enough that a pass outlasts
	// franz-go's start, small enough to stay in the page cache.
	securityFillBytes = 256 << 20
)

// securedListeners are the listeners measured against PLAINTEXT.
var securedListeners = []string{"SSL", "SASL_SSL"}

// secureWharf is a `wharf serve` process with PLAINTEXT, SSL and SASL_SSL
// Kafka listeners and a SCRAM user.
type secureWharf struct {
	*child
	addrs  map[string]string // by security protocol
	client *tls.Config
}

func (s *suite) securitySection(ctx context.Context) error {
	w, err := s.startSecureWharf(ctx)
	if err != nil {
		return fmt.Errorf("start wharf with TLS listeners: %w", err)
	}
	defer func() {
		s.procs.forget(w.child)
		if err := w.terminate(time.Minute); err != nil {
			s.logf("stopping wharf (security): %v", err)
		}
	}()
	topic := s.uniqueName("secure-consume")
	records, err := fillTopic(ctx, w.addrs["PLAINTEXT"], topic, 1, 1024, securityFillBytes)
	if err != nil {
		return fmt.Errorf("fill %s: %w", topic, err)
	}
	side := func(protocol string, run secureWorkload) contender {
		name := "Wharf " + protocol
		return contender{name: name, pid: w.processID, run: func(ctx context.Context) (figures, error) {
			return withCPUPerMB(ctx, s.newWindow(), w.pid(), func(win window) (figures, error) {
				return run(ctx, win, w.addrs[protocol], w.clientOpts(protocol))
			})
		}}
	}
	produce := func(ctx context.Context, win window, addr string, opts []kgo.Opt) (figures, error) {
		return s.runSecureProduce(ctx, win, w.addrs["PLAINTEXT"], addr, opts)
	}
	consume := func(ctx context.Context, win window, addr string, opts []kgo.Opt) (figures, error) {
		return runSecureConsume(ctx, win, addr, opts, topic, records)
	}
	for _, protocol := range securedListeners {
		for _, workload := range []struct {
			name string
			run  secureWorkload
		}{
			{"produce acks=all (franz-go defaults, compression off)", produce},
			{"consume a 256 MiB topic from its start (page cache; PLAINTEXT sends it with sendfile, TLS reads and encrypts it)", consume},
		} {
			plain := side("PLAINTEXT", workload.run)
			err := s.compare(ctx, comparison{
				workload: fmt.Sprintf("Kafka %s over %s vs PLAINTEXT, 1 KiB records, 1 partition", workload.name, protocol),
				metrics:  []metric{{key: "mbps", label: "MB/s", unit: mbPerSec, target: 0.7}},
				wharf:    side(protocol, workload.run),
				peer:     &plain,
				notes: func(_ metric, secured, plain figures) string {
					return cpuPerMBNote(protocol, secured, plain)
				},
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// secureWorkload runs one workload over the listener at addr (a client
// with opts) and reports its MB/s of record values in win ("mbps").
type secureWorkload func(ctx context.Context, win window, addr string, opts []kgo.Opt) (figures, error)

// withCPUPerMB runs a workload measured in win and adds the CPU time the
// broker (process pid) and the clients (this process) spent per MB of
// records within the window, in ms ("brokerms", "clientms").
func withCPUPerMB(ctx context.Context, win window, pid int, run func(window) (figures, error)) (figures, error) {
	type sample struct{ broker, client float64 }
	read := func() sample {
		b, _ := processCPUSeconds(pid)
		return sample{b, selfCPUSeconds()}
	}
	samples := make(chan [2]sample, 1)
	go func() {
		var s [2]sample
		if sleepUntil(ctx, win.start) == nil {
			s[0] = read()
		}
		if sleepUntil(ctx, win.end) == nil {
			s[1] = read()
		}
		samples <- s
	}()
	f, err := run(win)
	s := <-samples
	if err != nil || ctx.Err() != nil {
		return f, err
	}
	mb := f["mbps"] * win.seconds()
	f["brokerms"] = 1000 * (s[1].broker - s[0].broker) / mb
	f["clientms"] = 1000 * (s[1].client - s[0].client) / mb
	return f, nil
}

// cpuPerMBNote gives the broker's and the client's CPU time per MB of
// records on each listener, and how much of what the secured listener
// adds is the client's: both share the machine's cores, so the client's
// TLS slows the row as much as the broker's does.
func cpuPerMBNote(protocol string, secured, plain figures) string {
	ms := func(f figures, key string) string { return formatNumber(figureOr(f, key)) + " ms" }
	note := fmt.Sprintf("CPU per MB, broker: %s (%s), %s (PLAINTEXT); clients: %s (%s), %s (PLAINTEXT)",
		ms(secured, "brokerms"), protocol, ms(plain, "brokerms"), ms(secured, "clientms"), protocol, ms(plain, "clientms"))
	brokerAdds := figureOr(secured, "brokerms") - figureOr(plain, "brokerms")
	clientAdds := figureOr(secured, "clientms") - figureOr(plain, "clientms")
	if brokerAdds+clientAdds > 0 {
		note += fmt.Sprintf("; %s adds %s ms per MB, %.0f %% of it the client's", protocol,
			formatNumber(brokerAdds+clientAdds), 100*clientAdds/(brokerAdds+clientAdds))
	}
	return note
}

// startSecureWharf starts a Wharf of its own for the security rows, with a
// self-signed certificate and the SCRAM user.
func (s *suite) startSecureWharf(ctx context.Context) (*secureWharf, error) {
	dir := filepath.Join(s.work, "wharf-security")
	cert, key, pool, err := writeSelfSignedCert(dir)
	if err != nil {
		return nil, err
	}
	w := &secureWharf{addrs: map[string]string{}, client: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}}
	var listeners []string
	for _, protocol := range append([]string{"PLAINTEXT"}, securedListeners...) {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		w.addrs[protocol] = loopback(port)
		listeners = append(listeners, protocol+"://"+w.addrs[protocol])
	}
	cmd := exec.Command(s.wharfBin, "serve",
		"--data-dir", filepath.Join(dir, "data"),
		"--kafka-listeners", strings.Join(listeners, ","),
		"--tls-cert", cert, "--tls-key", key,
		"--admin-user", securityUser, "--admin-password", securityPassword,
		"--amqp-addr", "", "--amqps-addr", "", "--http-addr", "", "--https-addr", "", "--nats-addr", "",
		"--log-level", "warn")
	w.child, err = s.procs.start("wharf (security)", cmd, filepath.Join(s.work, "wharf-security.log"))
	if err != nil {
		return nil, err
	}
	for _, addr := range w.addrs {
		if err := waitForTCP(ctx, w.child, addr, 2*time.Minute); err != nil {
			w.terminate(10 * time.Second)
			return nil, err
		}
	}
	return w, nil
}

// clientOpts are the franz-go options of a client of the listener
// protocol: TLS trusting the benchmark's certificate, SCRAM-SHA-512.
func (w *secureWharf) clientOpts(protocol string) []kgo.Opt {
	var opts []kgo.Opt
	if strings.HasSuffix(protocol, "SSL") {
		opts = append(opts, kgo.DialTLSConfig(w.client.Clone()))
	}
	if strings.HasPrefix(protocol, "SASL_") {
		opts = append(opts, kgo.SASL(scram.Auth{User: securityUser, Pass: securityPassword}.AsSha512Mechanism()))
	}
	return opts
}

// runSecureProduce is the acks=all, 1 KiB, 1 partition produce row over
// one listener (addr, with opts); the topic is made over adminAddr.
func (s *suite) runSecureProduce(ctx context.Context, w window, adminAddr, addr string, opts []kgo.Opt) (figures, error) {
	return s.withTopic(ctx, adminAddr, 1, func(topic string) (figures, error) {
		cl, err := kgo.NewClient(append(producerOpts(addr, topic, true), opts...)...)
		if err != nil {
			return nil, err
		}
		defer cl.Close()
		value := make([]byte, 1024)
		var acked atomic.Int64
		var firstErr errOnce
		produceUntil(ctx, cl, w.end, func() *kgo.Record { return &kgo.Record{Value: value} }, func(err error) {
			if err != nil {
				firstErr.set(err)
			} else if w.contains(time.Now()) {
				acked.Add(1)
			}
		})
		if err := firstErr.get(); err != nil {
			return nil, err
		}
		return figures{"mbps": float64(acked.Load()) * 1024 / w.seconds() / 1e6}, nil
	})
}

// runSecureConsume reads topic (records of 1 KiB) over one listener from
// its start, with one franz-go consumer (defaults), and again from the
// start whenever it reaches the end, until the window ends.
func runSecureConsume(ctx context.Context, w window, addr string, opts []kgo.Opt, topic string, records int64) (figures, error) {
	var consumed int64
	for time.Now().Before(w.end) {
		cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
		if err != nil {
			return nil, err
		}
		var pass int64
		for pass < records && time.Now().Before(w.end) {
			fs := cl.PollFetches(ctx)
			if err := fetchError(fs); err != nil {
				cl.Close()
				return nil, err
			}
			pass += int64(fs.NumRecords())
			if w.contains(time.Now()) {
				consumed += int64(fs.NumRecords())
			}
		}
		cl.Close()
	}
	return figures{"mbps": float64(consumed) * 1024 / w.seconds() / 1e6}, nil
}
