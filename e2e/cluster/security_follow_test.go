package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// The security tests' administrator (a super user, --admin-user on every
// node).
const (
	securityAdmin         = "admin"
	securityAdminPassword = "adm1n-cluster-pass"
)

// securedCluster is three `wharf serve` processes, each with one
// SASL_PLAINTEXT Kafka listener, the ACL authorizer on, AMQP and the
// management API.
type securedCluster struct {
	nodes []*node
	amqp  []string // node i+1's AMQP address
	http  []string // node i+1's management API address
}

func startSecuredCluster(t *testing.T) *securedCluster {
	t.Helper()
	c := &securedCluster{nodes: prepareCluster(t, 3)}
	for _, nd := range c.nodes {
		amqpAddr, httpAddr := freeAddr(t), freeAddr(t)
		nd.kafkaProtocol = "SASL_PLAINTEXT"
		nd.extraArgs = []string{"--amqp-addr", amqpAddr, "--http-addr", httpAddr,
			"--kafka-authorizer", "--super-users", "User:" + securityAdmin,
			"--admin-user", securityAdmin, "--admin-password", securityAdminPassword}
		c.amqp, c.http = append(c.amqp, amqpAddr), append(c.http, httpAddr)
		nd.start()
	}
	for _, nd := range c.nodes {
		nd.waitReady()
	}
	logsOnFailure(t, c.nodes)
	return c
}

// kafkaClient is a franz-go client logged in as user with SCRAM-SHA-512,
// seeded with node i+1 only.
func (c *securedCluster) kafkaClient(t *testing.T, i int, user, password string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(c.nodes[i].kafkaAddr),
		kgo.SASL(scram.Auth{User: user, Pass: password}.AsSha512Mechanism())}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// admin is a kadm client of the administrator whose every connection
// goes to node i+1, whichever broker franz-go means: it sends the admin
// APIs to the controller, and the test says which node writes.
func (c *securedCluster) admin(t *testing.T, i int) *kadm.Client {
	addr := c.nodes[i].kafkaAddr
	pinned := func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	return kadm.NewClient(c.kafkaClient(t, i, securityAdmin, securityAdminPassword, kgo.Dialer(pinned)))
}

// login logs in to node i+1 as user over a new connection: nil, or the
// reason it failed.
func (c *securedCluster) login(ctx context.Context, t *testing.T, i int, user, password string) error {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.nodes[i].kafkaAddr),
		kgo.SASL(scram.Auth{User: user, Pass: password}.AsSha512Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	_, err = cl.SeedBrokers()[0].Request(ctx, kmsg.NewPtrMetadataRequest())
	return err
}

// mustLogIn fails the test unless user logs in to node i+1 at once.
func (c *securedCluster) mustLogIn(ctx context.Context, t *testing.T, i int, user, password string) {
	t.Helper()
	if err := c.login(ctx, t, i, user, password); err != nil {
		t.Fatalf("%s's login on node %d: %v", user, i+1, err)
	}
}

// eventually waits (up to 10 s) until cond holds, polling: what a node
// applies from the metadata log reaches the others one replication round
// trip later.
func eventually(ctx context.Context, t *testing.T, what string, cond func() error) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(10 * time.Second)
	for {
		err := cond()
		if err == nil {
			t.Logf("%s after %v", what, time.Since(start).Round(time.Millisecond))
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("%s: still not after 10s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// refusedLogin is cond for eventually: nil once node i+1 refuses the
// login.
func (c *securedCluster) refusedLogin(ctx context.Context, t *testing.T, i int, user, password string) func() error {
	return func() error {
		err := c.login(ctx, t, i, user, password)
		switch {
		case err == nil:
			return fmt.Errorf("node %d still lets %s in", i+1, user)
		case errors.Is(err, kerr.SaslAuthenticationFailed):
			return nil
		}
		return fmt.Errorf("node %d: %w, want SASL_AUTHENTICATION_FAILED", i+1, err)
	}
}

func upsertSCRAM(ctx context.Context, t *testing.T, adm *kadm.Client, user, password string) {
	t.Helper()
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: user, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: password}})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("set %s's password: %v", user, err)
	}
}

func createACLs(ctx context.Context, t *testing.T, adm *kadm.Client, b *kadm.ACLBuilder) {
	t.Helper()
	res, err := adm.CreateACLs(ctx, b)
	if err == nil {
		for _, r := range res {
			err = errors.Join(err, r.Err)
		}
	}
	if err != nil {
		t.Fatalf("create ACLs: %v", err)
	}
}

// TestSecurityFollowsTheCluster (issues 13 and 15): users, ACLs, client
// quotas, vhosts and permissions written through one node of three take
// effect on the others while they run. A login right after the write
// that made the user succeeds on every node (a node that does not know a
// user waits for the cluster's metadata before it refuses); a change
// that takes something away (a password changed, a user deleted, a DENY
// ACL) reaches the other nodes as they apply it, one replication round
// trip later.
func TestSecurityFollowsTheCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	c := startSecuredCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	admins := []*kadm.Client{c.admin(t, 0), c.admin(t, 1), c.admin(t, 2)}

	t.Run("users", func(t *testing.T) {
		upsertSCRAM(ctx, t, admins[0], "alice", "alice-pass-1")
		c.mustLogIn(ctx, t, 1, "alice", "alice-pass-1")
		c.mustLogIn(ctx, t, 2, "alice", "alice-pass-1")

		upsertSCRAM(ctx, t, admins[1], "alice", "alice-pass-2")
		eventually(ctx, t, "node 1 refuses alice's old password", c.refusedLogin(ctx, t, 0, "alice", "alice-pass-1"))
		c.mustLogIn(ctx, t, 0, "alice", "alice-pass-2")
		c.mustLogIn(ctx, t, 2, "alice", "alice-pass-2")

		res, err := admins[2].AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "alice", Mechanism: kadm.ScramSha512}}, nil)
		if err == nil {
			err = res.Error()
		}
		if err != nil {
			t.Fatalf("delete alice: %v", err)
		}
		for i := range c.nodes {
			eventually(ctx, t, fmt.Sprintf("node %d refuses the deleted alice", i+1), c.refusedLogin(ctx, t, i, "alice", "alice-pass-2"))
		}
	})

	const topic = "secured"
	createTopicN(ctx, t, admins[0], topic, 1)

	t.Run("acls", func(t *testing.T) {
		upsertSCRAM(ctx, t, admins[0], "bob", "bob-pass")
		createACLs(ctx, t, admins[0], kadm.NewACLs().Topics(topic).Allow("User:bob").
			Operations(kadm.OpRead, kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral))
		bob := c.kafkaClient(t, 0, "bob", "bob-pass")
		fetchCode := func() int16 {
			req := kmsg.NewPtrFetchRequest()
			req.MaxWaitMillis, req.MaxBytes = 0, 1<<20
			ft := kmsg.NewFetchRequestTopic()
			ft.Topic = topic
			fp := kmsg.NewFetchRequestTopicPartition()
			fp.PartitionMaxBytes = 1 << 20
			ft.Partitions = append(ft.Partitions, fp)
			req.Topics = append(req.Topics, ft)
			resp, err := bob.SeedBrokers()[0].Request(ctx, req)
			if err != nil {
				t.Fatalf("bob's fetch on node 1: %v", err)
			}
			return resp.(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode
		}
		if code := fetchCode(); code != 0 && code != kerr.NotLeaderForPartition.Code {
			t.Fatalf("bob's fetch on node 1 before the DENY: %v", kerr.ErrorForCode(code))
		}
		createACLs(ctx, t, admins[2], kadm.NewACLs().Topics(topic).Deny("User:bob").
			Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))
		eventually(ctx, t, "node 1 refuses bob's fetch", func() error {
			if code := fetchCode(); code != kerr.TopicAuthorizationFailed.Code {
				return fmt.Errorf("fetch: %v", kerr.ErrorForCode(code))
			}
			return nil
		})
	})

	t.Run("quotas", func(t *testing.T) {
		upsertSCRAM(ctx, t, admins[0], "carl", "carl-pass")
		createACLs(ctx, t, admins[0], kadm.NewACLs().Topics(topic).Allow("User:carl").
			Operations(kadm.OpWrite, kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral))
		leader := waitLeader(ctx, t, admins[0], topic, -1)
		setter := int(leader) % 3 // a node that does not lead the partition (ids are 1..3)
		user := "carl"
		res, err := admins[setter].AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
			Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &user}},
			Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1024}},
		}})
		if err == nil {
			for _, r := range res {
				err = errors.Join(err, r.Err)
			}
		}
		if err != nil {
			t.Fatalf("set carl's quota on node %d: %v", setter+1, err)
		}
		var throttledBy atomic.Int32
		producer := c.kafkaClient(t, 0, "carl", "carl-pass", kgo.DefaultProduceTopic(topic),
			kgo.WithHooks(throttleHook(func(node int32) { throttledBy.Store(node) })))
		value := bytes.Repeat([]byte("q"), 4096)
		eventually(ctx, t, fmt.Sprintf("node %d throttles carl's produce", leader), func() error {
			if err := producer.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
				t.Fatalf("carl's produce: %v", err)
			}
			if node := throttledBy.Load(); node != leader {
				return fmt.Errorf("no throttle from node %d (last from %d)", leader, node)
			}
			return nil
		})
	})

	t.Run("amqp", func(t *testing.T) {
		for _, put := range []struct{ path, body string }{
			{"/api/users/carol", `{"password":"carol-pass","tags":""}`},
			{"/api/vhosts/billing", `{}`},
			{"/api/permissions/billing/carol", `{"configure":".*","write":".*","read":".*"}`},
		} {
			c.managementPut(ctx, t, 0, put.path, put.body)
		}
		conn, err := amqp.Dial("amqp://carol:carol-pass@" + c.amqp[1] + "/billing")
		if err != nil {
			t.Fatalf("carol's AMQP login to vhost billing on node 2: %v", err)
		}
		defer conn.Close()
		ch := channel(t, conn)
		q, err := ch.QueueDeclare("invoices", true, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := ch.PublishWithContext(ctx, "", q.Name, false, false, amqp.Publishing{Body: []byte("inv-1")}); err != nil {
			t.Fatal(err)
		}
		eventually(ctx, t, "carol gets her message on node 2", func() error {
			d, ok, err := ch.Get(q.Name, true)
			switch {
			case err != nil:
				t.Fatal(err)
			case !ok:
				return errors.New("queue empty")
			case string(d.Body) != "inv-1":
				t.Fatalf("got %q", d.Body)
			}
			return nil
		})
	})
}

// throttleHook calls fn with the node of every throttled response.
type throttleHook func(node int32)

func (h throttleHook) OnBrokerThrottle(meta kgo.BrokerMetadata, throttle time.Duration, _ bool) {
	if throttle > 0 {
		h(meta.NodeID)
	}
}

// managementPut sends a PUT to node i+1's management API as the
// administrator and fails the test unless it succeeds.
func (c *securedCluster) managementPut(ctx context.Context, t *testing.T, i int, path, body string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, "http://"+c.http[i]+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(securityAdmin, securityAdminPassword)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("PUT %s on node %d: %v", path, i+1, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		text, _ := io.ReadAll(resp.Body)
		t.Fatalf("PUT %s on node %d: %s %s", path, i+1, resp.Status, text)
	}
}
