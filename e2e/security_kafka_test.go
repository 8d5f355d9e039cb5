package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	kafka "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	kafkaplain "github.com/segmentio/kafka-go/sasl/plain"
	kafkascram "github.com/segmentio/kafka-go/sasl/scram"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	wharfkafka "github.com/wharf-mq/wharf/internal/kafka"
	"github.com/wharf-mq/wharf/internal/node"
	"github.com/wharf-mq/wharf/internal/nodetest"
)

// secureNode is a node with PLAINTEXT, SASL_PLAINTEXT and SASL_SSL
// listeners on loopback and a throw-away CA.
type secureNode struct {
	*node.Node
	pki *nodetest.PKI
}

func startSecureNode(t *testing.T, opts ...nodetest.Option) secureNode {
	t.Helper()
	pki := nodetest.NewPKI(t)
	listeners := nodetest.WithConfig(func(c *node.Config) {
		for _, p := range []wharfkafka.SecurityProtocol{wharfkafka.Plaintext, wharfkafka.SASLPlaintext, wharfkafka.SASLSSL} {
			c.KafkaListeners = append(c.KafkaListeners, node.KafkaListener{Protocol: p, Addr: "127.0.0.1:0"})
		}
		c.Security.TLS = pki.ServerFiles(false)
	})
	return secureNode{Node: startNode(t, append([]nodetest.Option{listeners}, opts...)...), pki: pki}
}

func (n secureNode) addUser(t *testing.T, name, password string) {
	t.Helper()
	if err := n.Users().Put(name, password, nil); err != nil {
		t.Fatal(err)
	}
}

// TestFranzGoSCRAMOverTLS: franz-go logs in with SCRAM-SHA-512 over the
// SASL_SSL listener, produces and reads back; the broker address it is
// given is the SASL_SSL listener's.
func TestFranzGoSCRAMOverTLS(t *testing.T) {
	t.Parallel()
	n := startSecureNode(t)
	n.addUser(t, "franz", "franz-secret-1")
	addr := n.KafkaListenerAddr(wharfkafka.SASLSSL)
	cl := newFranz(t, n.Node, kgo.SeedBrokers(addr), kgo.DialTLSConfig(n.pki.ClientConfig("")),
		kgo.SASL(scram.Auth{User: "franz", Pass: "franz-secret-1"}.AsSha512Mechanism()),
		kgo.AllowAutoTopicCreation(), kgo.ConsumeTopics("over-tls"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	produceSync(t, cl, &kgo.Record{Topic: "over-tls", Value: []byte("sealed")})
	recs := consumeN(t, cl, 1)
	if string(recs[0].Value) != "sealed" {
		t.Fatalf("read %q", recs[0].Value)
	}
	meta, err := kadm.NewClient(cl).BrokerMetadata(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%s:%d", meta.Brokers[0].Host, meta.Brokers[0].Port); got != addr {
		t.Fatalf("the SASL_SSL client is told to use %s, not %s", got, addr)
	}
}

// kcatConfig writes librdkafka properties to a file for kcat -F, so that
// no password appears on a command line or in a test failure.
func kcatConfig(t *testing.T, props map[string]string) string {
	t.Helper()
	var b strings.Builder
	for k, v := range props {
		fmt.Fprintf(&b, "%s=%s\n", k, v)
	}
	path := filepath.Join(t.TempDir(), "kcat.conf")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestKcatSASLSSL: librdkafka (kcat) with security.protocol=SASL_SSL,
// verifying the broker's certificate, with PLAIN and with SCRAM-SHA-256;
// a wrong password fails with librdkafka's authentication error.
func TestKcatSASLSSL(t *testing.T) {
	requireKcat(t)
	t.Parallel()
	n := startSecureNode(t)
	n.addUser(t, "rdkafka", "rdkafka-secret-2")
	addr := n.KafkaListenerAddr(wharfkafka.SASLSSL)
	props := func(mechanism, password string) string {
		return kcatConfig(t, map[string]string{
			"security.protocol": "SASL_SSL",
			"sasl.mechanisms":   mechanism,
			"sasl.username":     "rdkafka",
			"sasl.password":     password,
			"ssl.ca.location":   n.pki.CAFile,
		})
	}
	plainConf, scramConf := props("PLAIN", "rdkafka-secret-2"), props("SCRAM-SHA-256", "rdkafka-secret-2")
	runKcat(t, "one\ntwo\n", "-F", plainConf, "-b", addr, "-P", "-t", "kcat-tls")
	out := runKcat(t, "", "-F", scramConf, "-b", addr, "-C", "-t", "kcat-tls", "-o", "beginning", "-e", "-f", "%s\n")
	if out != "one\ntwo\n" {
		t.Fatalf("kcat over SASL_SSL read %q", out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), kcatTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, requireKcat(t), "-F", props("SCRAM-SHA-256", "wrong-password-3"), "-b", addr, "-L")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil || !strings.Contains(stderr.String(), "Authentication failed") {
		t.Fatalf("kcat with a wrong password: %v\n%s", err, stderr.String())
	}
}

// TestKafkaGoSASLAsItsOwnTestsDo sets up what segmentio/kafka-go's own
// SASL tests expect (PLAIN user adminplain; SCRAM user adminscram with a
// different password per mechanism, created through
// AlterUserScramCredentials) and logs in with kafka-go's mechanisms,
// right and wrong.
func TestKafkaGoSASLAsItsOwnTestsDo(t *testing.T) {
	t.Parallel()
	n := startSecureNode(t)
	n.addUser(t, "adminplain", "admin-secret")
	adm := newAdmin(t, n.Node)
	for mech, password := range map[kadm.ScramMechanism]string{kadm.ScramSha256: "admin-secret-256", kadm.ScramSha512: "admin-secret-512"} {
		// One request per mechanism: Kafka refuses a user twice in one.
		res, err := adm.AlterUserSCRAMs(testContext(t), nil, []kadm.UpsertSCRAM{{User: "adminscram", Mechanism: mech, Iterations: 8192, Password: password}})
		if err != nil || res.Error() != nil {
			t.Fatalf("AlterUserScramCredentials %v: %v %v", mech, err, res.Error())
		}
	}
	createTopic(t, adm, "test-writer-0", 1, nil)

	mechanism := func(m kafkascram.Algorithm, password string) sasl.Mechanism {
		mech, err := kafkascram.Mechanism(m, "adminscram", password)
		if err != nil {
			t.Fatal(err)
		}
		return mech
	}
	connect := func(d *kafka.Dialer) error {
		conn, err := d.DialLeader(testContext(t), "tcp", n.KafkaListenerAddr(wharfkafka.SASLPlaintext), "test-writer-0", 0)
		if err == nil {
			conn.Close()
		}
		return err
	}
	for _, c := range []struct {
		name  string
		right *kafka.Dialer
		wrong *kafka.Dialer
	}{
		{"PLAIN", &kafka.Dialer{SASLMechanism: kafkaplain.Mechanism{Username: "adminplain", Password: "admin-secret"}},
			&kafka.Dialer{SASLMechanism: kafkaplain.Mechanism{Username: "adminplain", Password: "badpassword"}}},
		{"SCRAM-SHA-256", &kafka.Dialer{SASLMechanism: mechanism(kafkascram.SHA256, "admin-secret-256")},
			&kafka.Dialer{SASLMechanism: mechanism(kafkascram.SHA256, "admin-secret-512")}},
		{"SCRAM-SHA-512", &kafka.Dialer{SASLMechanism: mechanism(kafkascram.SHA512, "admin-secret-512")},
			&kafka.Dialer{SASLMechanism: mechanism(kafkascram.SHA512, "badpassword")}},
	} {
		for range 3 { // a mechanism is reusable
			if err := connect(c.right); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		}
		if err := connect(c.wrong); !errors.Is(err, kafka.SASLAuthenticationFailed) {
			t.Fatalf("%s with a wrong password: %v", c.name, err)
		}
	}
}
