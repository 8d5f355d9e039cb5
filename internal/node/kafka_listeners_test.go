package node_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/kafka"
	"github.com/wharf-mq/wharf/internal/node"
	"github.com/wharf-mq/wharf/internal/nodetest"
	"github.com/wharf-mq/wharf/internal/tlsconf"
)

func TestParseKafkaListeners(t *testing.T) {
	got, err := node.ParseKafkaListeners("PLAINTEXT://127.0.0.1:9092, sasl_plaintext://:9093,SSL://[::1]:9094,SASL_SSL://host:9095")
	if err != nil {
		t.Fatal(err)
	}
	want := []node.KafkaListener{
		{Protocol: kafka.Plaintext, Addr: "127.0.0.1:9092"},
		{Protocol: kafka.SASLPlaintext, Addr: ":9093"},
		{Protocol: kafka.SSL, Addr: "[::1]:9094"},
		{Protocol: kafka.SASLSSL, Addr: "host:9095"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("listener %d: got %v, want %v", i, got[i], want[i])
		}
	}
	for in, wantErr := range map[string]string{
		"":                                      "no listener",
		"127.0.0.1:9092":                        "want NAME://HOST:PORT",
		"INTERNAL://:9092":                      "unknown name INTERNAL",
		"PLAINTEXT://:9092,PLAINTEXT://:9093":   "appears twice",
		"PLAINTEXT://:9092,SASL_SSL://:9092":    "share port 9092",
		"PLAINTEXT://localhost":                 "missing port",
		"PLAINTEXT://:http":                     "not a number",
		"PLAINTEXT://127.0.0.1:0,SSL://[::1]:0": "",
	} {
		_, err := node.ParseKafkaListeners(in)
		if (err == nil) != (wantErr == "") || err != nil && !strings.Contains(err.Error(), wantErr) {
			t.Errorf("ParseKafkaListeners(%q) = %v, want an error with %q", in, err, wantErr)
		}
	}
}

// withListeners starts the node with the given listeners on 127.0.0.1
// and the PKI's certificate.
func withListeners(pki *nodetest.PKI, clientCA bool, protocols ...kafka.SecurityProtocol) nodetest.Option {
	return nodetest.WithConfig(func(c *node.Config) {
		for _, p := range protocols {
			c.KafkaListeners = append(c.KafkaListeners, node.KafkaListener{Protocol: p, Addr: "127.0.0.1:0"})
		}
		c.Security.TLS = pki.ServerFiles(clientCA)
	})
}

// brokerAddr is the broker address a Metadata answer gives the client.
func brokerAddr(t *testing.T, cl *kgo.Client) (int32, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Brokers) != 1 {
		t.Fatalf("%d brokers in Metadata", len(resp.Brokers))
	}
	b := resp.Brokers[0]
	return b.NodeID, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
}

// TestKafkaListenersServeTheSameDataEachAdvertisingItself: a record
// produced on the PLAINTEXT listener is read over the SSL one, and each
// listener's clients are given that listener's address, as Kafka's
// listener names do; the node is broker 1.
func TestKafkaListenersServeTheSameDataEachAdvertisingItself(t *testing.T) {
	pki := nodetest.NewPKI(t)
	n := nodetest.Start(t, withListeners(pki, false, kafka.Plaintext, kafka.SSL))
	plainAddr, sslAddr := n.KafkaListenerAddr(kafka.Plaintext), n.KafkaListenerAddr(kafka.SSL)
	if plainAddr == "" || sslAddr == "" || plainAddr == sslAddr {
		t.Fatalf("listeners bound at %q and %q", plainAddr, sslAddr)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	plain := newClient(t, plainAddr, kgo.DefaultProduceTopic("shared"), kgo.AllowAutoTopicCreation())
	if err := plain.ProduceSync(ctx, kgo.StringRecord("over plaintext")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	secure := newClient(t, sslAddr, kgo.DialTLSConfig(pki.ClientConfig("")),
		kgo.ConsumeTopics("shared"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for cl, want := range map[*kgo.Client]string{plain: plainAddr, secure: sslAddr} {
		id, got := brokerAddr(t, cl)
		if got != want || id != 1 {
			t.Fatalf("Metadata gives broker %d at %s, want broker 1 at %s", id, got, want)
		}
	}
	fetches := secure.PollRecords(ctx, 1)
	if err := fetches.Err(); err != nil {
		t.Fatal(err)
	}
	if recs := fetches.Records(); len(recs) != 1 || string(recs[0].Value) != "over plaintext" {
		t.Fatalf("read %v over SSL", recs)
	}

	configs, err := kadm.NewClient(plain).DescribeBrokerConfigs(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := configs.On("1", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rc.Configs {
		if c.Key == "advertised.listeners" {
			want := "PLAINTEXT://" + plainAddr + ",SSL://" + sslAddr
			if c.MaybeValue() != want {
				t.Fatalf("advertised.listeners = %q, want %q", c.MaybeValue(), want)
			}
			return
		}
	}
	t.Fatal("no advertised.listeners in the broker's configs")
}

// TestSSLListenerWithClientCARequiresACertificate: with --tls-client-ca a
// client without a certificate from that CA gets no answer at all.
func TestSSLListenerWithClientCARequiresACertificate(t *testing.T) {
	pki := nodetest.NewPKI(t)
	n := nodetest.Start(t, withListeners(pki, true, kafka.SSL))
	addr := n.KafkaListenerAddr(kafka.SSL)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	anonymous := newClient(t, addr, kgo.DialTLSConfig(pki.ClientConfig("")), kgo.RequestRetries(0))
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, anonymous); err == nil {
		t.Fatal("a client without a certificate was answered")
	}

	withCert := newClient(t, addr, kgo.DialTLSConfig(pki.ClientConfig("alice")))
	if id, got := brokerAddr(t, withCert); got != addr || id != 1 {
		t.Fatalf("Metadata gives broker %d at %s, want 1 at %s", id, got, addr)
	}
}

func TestTLSListenerNeedsACertificate(t *testing.T) {
	cfg := node.Config{DataDir: t.TempDir(),
		KafkaListeners: []node.KafkaListener{{Protocol: kafka.SASLSSL, Addr: "127.0.0.1:0"}}}
	n, err := node.Start(cfg)
	if err == nil {
		n.Close(context.Background())
		t.Fatal("a SASL_SSL listener started without a certificate")
	}
	if !strings.Contains(err.Error(), "--tls-cert") {
		t.Fatalf("the error does not name the flag: %v", err)
	}
	// The node did not start, so its data directory is free again.
	cfg.KafkaListeners = nil
	cfg.KafkaAddr = "127.0.0.1:0"
	cfg.Security.TLS = tlsconf.Files{}
	n, err = node.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.Close(context.Background())
}

// TestUnauthenticatedKafkaListenerOnTheNetworkWarns: a PLAINTEXT listener
// on every interface logs a warning naming the flags that secure it; one
// on loopback, or one that authenticates, does not.
func TestUnauthenticatedKafkaListenerOnTheNetworkWarns(t *testing.T) {
	pki := nodetest.NewPKI(t)
	for _, c := range []struct {
		listeners []node.KafkaListener
		clientCA  bool
		warn      string // listener named in the warning; "" none
	}{
		{[]node.KafkaListener{{Protocol: kafka.Plaintext, Addr: ":0"}}, false, "PLAINTEXT"},
		{[]node.KafkaListener{{Protocol: kafka.SSL, Addr: ":0"}}, false, "SSL"},
		{[]node.KafkaListener{{Protocol: kafka.Plaintext, Addr: "127.0.0.1:0"}}, false, ""},
		{[]node.KafkaListener{{Protocol: kafka.SASLPlaintext, Addr: ":0"}, {Protocol: kafka.SASLSSL, Addr: ":0"}}, false, ""},
		{[]node.KafkaListener{{Protocol: kafka.SSL, Addr: ":0"}}, true, ""},
	} {
		var logs strings.Builder
		n, err := node.Start(node.Config{
			DataDir:        t.TempDir(),
			KafkaListeners: c.listeners,
			Security:       node.SecurityConfig{TLS: pki.ServerFiles(c.clientCA)},
			Logger:         slog.New(slog.NewTextHandler(&syncWriter{w: &logs}, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		n.Close(context.Background())
		warned := strings.Contains(logs.String(), "without authentication")
		if warned != (c.warn != "") || warned && !strings.Contains(logs.String(), "listener="+c.warn+" ") ||
			warned && !strings.Contains(logs.String(), "--kafka-listeners SASL_SSL://") {
			t.Errorf("listeners %v (client CA %v): warning %v, want %q in:\n%s", c.listeners, c.clientCA, warned, c.warn, logs.String())
		}
	}
}

// syncWriter serialises writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// TestSSLClientCertificateIsThePrincipal: on an SSL listener with
// --tls-client-ca the certificate's subject is the principal ACLs name,
// as Kafka's default principal builder makes it.
func TestSSLClientCertificateIsThePrincipal(t *testing.T) {
	pki := nodetest.NewPKI(t)
	n := nodetest.Start(t, withListeners(pki, true, kafka.SSL), nodetest.WithConfig(func(c *node.Config) {
		c.KafkaSecurity = node.KafkaSecurityConfig{Authorizer: true, SuperUsers: []string{"User:CN=root,O=wharf tests"}}
	}))
	addr := n.KafkaListenerAddr(kafka.SSL)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	root := kadm.NewClient(newClient(t, addr, kgo.DialTLSConfig(pki.ClientConfig("root"))))
	if _, err := root.CreateTopic(ctx, 1, 1, nil, "certified"); err != nil {
		t.Fatalf("the super user's certificate: %v", err)
	}
	alice := newClient(t, addr, kgo.DialTLSConfig(pki.ClientConfig("alice")), kgo.DefaultProduceTopic("certified"),
		kgo.DisableIdempotentWrite(), kgo.RecordRetries(0))
	if err := alice.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice without an ACL: %v", err)
	}
	results, err := root.CreateACLs(ctx, kadm.NewACLs().Topics("certified").Allow("User:CN=alice,O=wharf tests").Operations(kadm.OpWrite))
	if err != nil || results[0].Err != nil {
		t.Fatalf("create ACL: %v %+v", err, results)
	}
	if err := alice.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr(); err != nil {
		t.Fatalf("alice with an ACL for her certificate's subject: %v", err)
	}
}
