package cluster

import (
	"bytes"
	"context"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha512"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
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

// adminOn is the administrator's connection to node i+1: the admin
// requests sent on it are answered, and written, there. (franz-go's kadm
// sends them to the controller, whichever node that is.)
func (c *securedCluster) adminOn(t *testing.T, i int) *kgo.Broker {
	return c.kafkaClient(t, i, securityAdmin, securityAdminPassword).SeedBrokers()[0]
}

// adminRequest sends req on node i+1 as the administrator and returns
// the response, failing the test on a transport error.
func (c *securedCluster) adminRequest(ctx context.Context, t *testing.T, i int, req kmsg.Request) kmsg.Response {
	t.Helper()
	resp, err := c.adminOn(t, i).Request(ctx, req)
	if err != nil {
		t.Fatalf("%s on node %d: %v", kmsg.NameForKey(req.Key()), i+1, err)
	}
	return resp
}

// upsertSCRAM sets user's SCRAM-SHA-512 password through node i+1, as
// kadm.AlterUserSCRAMs salts it.
func (c *securedCluster) upsertSCRAM(ctx context.Context, t *testing.T, i int, user, password string) {
	t.Helper()
	salt := make([]byte, 24)
	rand.Read(salt)
	salted, err := pbkdf2.Key(sha512.New, password, salt, 4096, sha512.Size)
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	up.Name, up.Mechanism, up.Iterations, up.Salt, up.SaltedPassword = user, 2, 4096, salt, salted // 2: SCRAM-SHA-512
	req.Upsertions = append(req.Upsertions, up)
	c.checkSCRAM(t, i, c.adminRequest(ctx, t, i, req))
}

// deleteSCRAM deletes user's SCRAM-SHA-512 credential through node i+1.
func (c *securedCluster) deleteSCRAM(ctx context.Context, t *testing.T, i int, user string) {
	t.Helper()
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	del := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	del.Name, del.Mechanism = user, 2
	req.Deletions = append(req.Deletions, del)
	c.checkSCRAM(t, i, c.adminRequest(ctx, t, i, req))
}

func (c *securedCluster) checkSCRAM(t *testing.T, i int, resp kmsg.Response) {
	t.Helper()
	for _, r := range resp.(*kmsg.AlterUserSCRAMCredentialsResponse).Results {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			t.Fatalf("AlterUserScramCredentials of %s on node %d: %v", r.User, i+1, err)
		}
	}
}

// createACL creates a literal ACL on topic for user from any host
// through node i+1.
func (c *securedCluster) createACL(ctx context.Context, t *testing.T, i int, topic, user string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) {
	t.Helper()
	req := kmsg.NewPtrCreateACLsRequest()
	cr := kmsg.NewCreateACLsRequestCreation()
	cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = kmsg.ACLResourceTypeTopic, topic, kmsg.ACLResourcePatternTypeLiteral
	cr.Principal, cr.Host, cr.Operation, cr.PermissionType = "User:"+user, "*", op, perm
	req.Creations = append(req.Creations, cr)
	for _, r := range c.adminRequest(ctx, t, i, req).(*kmsg.CreateACLsResponse).Results {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			t.Fatalf("CreateAcls on node %d: %v", i+1, err)
		}
	}
}

// setQuota sets one of user's client quotas through node i+1.
func (c *securedCluster) setQuota(ctx context.Context, t *testing.T, i int, user, key string, value float64) {
	t.Helper()
	req := kmsg.NewPtrAlterClientQuotasRequest()
	entry := kmsg.NewAlterClientQuotasRequestEntry()
	entity := kmsg.NewAlterClientQuotasRequestEntryEntity()
	entity.Type, entity.Name = "user", &user
	op := kmsg.NewAlterClientQuotasRequestEntryOp()
	op.Key, op.Value = key, value
	entry.Entity, entry.Ops = append(entry.Entity, entity), append(entry.Ops, op)
	req.Entries = append(req.Entries, entry)
	for _, r := range c.adminRequest(ctx, t, i, req).(*kmsg.AlterClientQuotasResponse).Entries {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			t.Fatalf("AlterClientQuotas on node %d: %v", i+1, err)
		}
	}
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
	admin := kadm.NewClient(c.kafkaClient(t, 0, securityAdmin, securityAdminPassword))

	t.Run("users", func(t *testing.T) {
		c.upsertSCRAM(ctx, t, 0, "alice", "alice-pass-1")
		c.mustLogIn(ctx, t, 1, "alice", "alice-pass-1")
		c.mustLogIn(ctx, t, 2, "alice", "alice-pass-1")

		c.upsertSCRAM(ctx, t, 1, "alice", "alice-pass-2")
		eventually(ctx, t, "node 1 refuses alice's old password", c.refusedLogin(ctx, t, 0, "alice", "alice-pass-1"))
		c.mustLogIn(ctx, t, 0, "alice", "alice-pass-2")
		c.mustLogIn(ctx, t, 2, "alice", "alice-pass-2")

		c.deleteSCRAM(ctx, t, 2, "alice")
		for i := range c.nodes {
			eventually(ctx, t, fmt.Sprintf("node %d refuses the deleted alice", i+1), c.refusedLogin(ctx, t, i, "alice", "alice-pass-2"))
		}
	})

	const topic = "secured"
	createTopicN(ctx, t, admin, topic, 1)

	t.Run("acls", func(t *testing.T) {
		c.upsertSCRAM(ctx, t, 0, "bob", "bob-pass")
		c.createACL(ctx, t, 0, topic, "bob", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow)
		md, err := admin.Metadata(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		topicID := md.Topics[topic].ID
		bob := c.kafkaClient(t, 0, "bob", "bob-pass").SeedBrokers()[0]
		fetchCode := func() int16 {
			req := kmsg.NewPtrFetchRequest()
			req.MaxWaitMillis, req.MaxBytes = 0, 1<<20
			ft := kmsg.NewFetchRequestTopic()
			ft.Topic, ft.TopicID = topic, topicID
			fp := kmsg.NewFetchRequestTopicPartition()
			fp.PartitionMaxBytes = 1 << 20
			ft.Partitions = append(ft.Partitions, fp)
			req.Topics = append(req.Topics, ft)
			resp, err := bob.Request(ctx, req)
			if err != nil {
				t.Fatalf("bob's fetch on node 1: %v", err)
			}
			return resp.(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode
		}
		if code := fetchCode(); code != 0 && code != kerr.NotLeaderForPartition.Code {
			t.Fatalf("bob's fetch on node 1 before the DENY: %v", kerr.ErrorForCode(code))
		}
		c.createACL(ctx, t, 2, topic, "bob", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeDeny)
		eventually(ctx, t, "node 1 refuses bob's fetch", func() error {
			if code := fetchCode(); code != kerr.TopicAuthorizationFailed.Code {
				return fmt.Errorf("fetch: %v", kerr.ErrorForCode(code))
			}
			return nil
		})
	})

	t.Run("quotas", func(t *testing.T) {
		c.upsertSCRAM(ctx, t, 0, "carl", "carl-pass")
		c.createACL(ctx, t, 0, topic, "carl", kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeAllow)
		leader := waitLeader(ctx, t, admin, topic, -1)
		setter := int(leader) % 3 // a node that does not lead the partition (ids are 1..3)
		c.setQuota(ctx, t, setter, "carl", "producer_byte_rate", 1024)
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

	t.Run("cli", func(t *testing.T) {
		c.cli(t, 0, "users", "add", "dave", "dave-pass", "--tags", "management")
		c.cli(t, 1, "vhosts", "add", "prod")
		c.cli(t, 2, "permissions", "set", "dave", "^dave\\.", ".*", ".*", "--vhost", "prod")
		c.cli(t, 2, "acls", "add", "--allow-principal", "User:dave", "--operation", "Read", "--topic", topic)
		for i := range c.nodes {
			for _, want := range []struct {
				args []string
				text string
			}{
				{[]string{"users", "list"}, "dave"},
				{[]string{"permissions", "list", "--vhost", "prod"}, "^dave\\."},
				{[]string{"acls", "list"}, "User:dave"},
			} {
				eventually(ctx, t, fmt.Sprintf("wharf %s on node %d shows %s", strings.Join(want.args, " "), i+1, want.text), func() error {
					if out := c.cli(t, i, want.args...); !strings.Contains(out, want.text) {
						return fmt.Errorf("no %q in:\n%s", want.text, out)
					}
					return nil
				})
			}
		}
	})
}

// cli runs a wharf client command against node i+1 as the administrator
// (the Kafka commands on its SASL listener, the others on its management
// API) and returns its output, failing the test if it fails.
func (c *securedCluster) cli(t *testing.T, i int, args ...string) string {
	t.Helper()
	cmd := exec.Command(c.nodes[i].bin, args...)
	cmd.Env = append(withoutWharfEnv(), "WHARF_USER="+securityAdmin, "WHARF_PASSWORD="+securityAdminPassword,
		"WHARF_BOOTSTRAP_SERVER="+c.nodes[i].kafkaAddr, "WHARF_HTTP_SERVER="+c.http[i])
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("wharf %s on node %d: %v\n%s", strings.Join(args, " "), i+1, err, out)
	}
	return string(out)
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
