package access

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/wharf-mq/wharf/internal/amqpwire"
	"github.com/wharf-mq/wharf/internal/kvtest"
)

func mustOpen(t *testing.T, kv KV) *Store {
	t.Helper()
	s, err := Open(kv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustSet(t *testing.T, s *Store, p Permission) {
	t.Helper()
	if err := s.SetPermission(p); err != nil {
		t.Fatal(err)
	}
}

// refusal returns err's reply text, failing unless it is a 403.
func refusal(t *testing.T, err error) string {
	t.Helper()
	var we *amqpwire.Error
	if !errors.As(err, &we) || we.Code != amqpwire.CodeAccessRefused || we.Hard {
		t.Fatalf("got %v, want a 403 channel error", err)
	}
	return we.Text
}

// TestResourceChecksAsRabbitMQ: unanchored expressions, "" grants
// nothing, the default exchange is "amq.default", RabbitMQ's texts.
func TestResourceChecksAsRabbitMQ(t *testing.T) {
	s := mustOpen(t, kvtest.New())
	mustSet(t, s, Permission{User: "u", VHost: "/", Configure: "^app\\.", Write: "", Read: "orders"})
	p := s.Principal("u", "/")
	for _, ok := range []struct {
		perm Perm
		kind Kind
		name string
	}{{Configure, Queue, "app.q"}, {Read, Queue, "new-orders-x"}} {
		if err := p.Check(ok.perm, ok.kind, ok.name); err != nil {
			t.Errorf("%s on %s: %v", ok.perm, ok.name, err)
		}
	}
	if got := refusal(t, p.Check(Configure, Queue, "myapp.q")); got != "ACCESS_REFUSED - configure access to queue 'myapp.q' in vhost '/' refused for user 'u'" {
		t.Errorf("text %q", got)
	}
	if got := refusal(t, p.Check(Write, Exchange, "")); got != "ACCESS_REFUSED - write access to exchange 'amq.default' in vhost '/' refused for user 'u'" {
		t.Errorf("text %q", got)
	}
	if err := s.Principal("u", "other").Check(Read, Queue, "orders"); err == nil {
		t.Error("a permission in / granted access to another vhost")
	}
	if !s.HasVHostAccessContext(context.Background(), "u", "/") || s.HasVHostAccessContext(context.Background(), "u", "other") || s.HasVHostAccessContext(context.Background(), "v", "/") {
		t.Error("vhost access does not follow the permissions")
	}
	if err := s.SetPermission(Permission{User: "u", VHost: "/", Configure: "(", Write: ".*", Read: ".*"}); !errors.Is(err, ErrInvalidRegexp) {
		t.Errorf("an invalid expression: %v", err)
	}
	if err := p.Check(Configure, Queue, "app.q"); err != nil {
		t.Errorf("a refused change replaced the permission: %v", err)
	}
}

// TestPassiveDeclareNeedsAnyPermission: passive declares need any one of
// the three (rabbitmq-server#16085), and name configure when refused.
func TestPassiveDeclareNeedsAnyPermission(t *testing.T) {
	s := mustOpen(t, kvtest.New())
	mustSet(t, s, Permission{User: "reader", VHost: "/", Read: "^q$"})
	p := s.Principal("reader", "/")
	if err := p.DeclareQueue("q", true, nil, nil); err != nil {
		t.Fatalf("passive declare with read only: %v", err)
	}
	if got := refusal(t, p.DeclareQueue("q", false, nil, nil)); !strings.Contains(got, "configure access to queue 'q'") {
		t.Fatalf("declare: %q", got)
	}
	if got := refusal(t, p.DeclareExchange("x", true, nil, nil)); !strings.Contains(got, "configure access to exchange 'x'") {
		t.Fatalf("passive exchange declare: %q", got)
	}
}

// TestDeadLetterExchangeOfANewQueue: a new queue with a dead-letter
// exchange needs read on itself and write on that exchange; an existing
// one is not asked again.
func TestDeadLetterExchangeOfANewQueue(t *testing.T) {
	s := mustOpen(t, kvtest.New())
	mustSet(t, s, Permission{User: "u", VHost: "/", Configure: ".*", Write: "^mine$", Read: ".*"})
	p := s.Principal("u", "/")
	args := amqpwire.Table{"x-dead-letter-exchange": "theirs"}
	isNew := func() bool { return false }
	if got := refusal(t, p.DeclareQueue("q", false, args, isNew)); !strings.Contains(got, "write access to exchange 'theirs'") {
		t.Fatalf("text %q", got)
	}
	if err := p.DeclareQueue("q", false, args, func() bool { return true }); err != nil {
		t.Fatalf("redeclaring an existing queue: %v", err)
	}
	if err := p.DeclareQueue("q", false, amqpwire.Table{"x-dead-letter-exchange": []byte("mine")}, isNew); err != nil {
		t.Fatalf("with write on the exchange: %v", err)
	}
	if got := refusal(t, p.DeclareExchange("x", false, amqpwire.Table{"alternate-exchange": "theirs"}, isNew)); !strings.Contains(got, "write access to exchange 'theirs'") {
		t.Fatalf("alternate exchange: %q", got)
	}
}

// TestTopicPermissions: a topic permission narrows publishing to and
// binding from one topic exchange, with {username} and {vhost}; other
// exchanges and other kinds of exchange are not narrowed.
func TestTopicPermissions(t *testing.T) {
	s := mustOpen(t, kvtest.New())
	mustSet(t, s, Permission{User: "u.1", VHost: "v", Configure: ".*", Write: ".*", Read: ".*"})
	if err := s.SetTopicPermission(TopicPermission{User: "u.1", VHost: "v", Exchange: "amq.topic",
		Write: "^{username}\\.", Read: "^{vhost}\\.public\\."}); err != nil {
		t.Fatal(err)
	}
	p := s.Principal("u.1", "v")
	keys := func(k ...string) func() []string { return func() []string { return k } }
	topic := func() bool { return true }
	if err := p.Publish("amq.topic", keys("u.1.orders"), topic); err != nil {
		t.Fatalf("own prefix: %v", err)
	}
	got := refusal(t, p.Publish("amq.topic", keys("u.1.ok", "ux1.orders"), topic))
	if got != "ACCESS_REFUSED - write access to topic 'ux1.orders' in exchange 'amq.topic' in vhost 'v' refused for user 'u.1'" {
		t.Fatalf("text %q (the user's name is quoted in the expression: '.' must not match 'x')", got)
	}
	if err := p.Publish("amq.topic", keys("anything"), func() bool { return false }); err != nil {
		t.Fatalf("an exchange that is not a topic exchange is not narrowed: %v", err)
	}
	if err := p.Publish("other", keys("anything"), func() bool { t.Fatal("asked for the type of an exchange without topic permission"); return true }); err != nil {
		t.Fatal(err)
	}
	if err := p.Bind(Queue, "q", "amq.topic", "v.public.x", topic); err != nil {
		t.Fatalf("bind within the read expression: %v", err)
	}
	if got := refusal(t, p.Bind(Queue, "q", "amq.topic", "v.private.x", topic)); !strings.Contains(got, "read access to topic 'v.private.x'") {
		t.Fatalf("bind: %q", got)
	}
	if err := s.SetTopicPermission(TopicPermission{User: "u.1", VHost: "v", Write: ".*"}); !errors.Is(err, ErrNoExchange) {
		t.Fatalf("a topic permission without an exchange: %v", err)
	}
}

// TestPrincipalSeesChanges: what a Principal remembers is dropped when a
// permission changes, so a connection's next operation is checked
// against the new permissions.
func TestPrincipalSeesChanges(t *testing.T) {
	s := mustOpen(t, kvtest.New())
	mustSet(t, s, Permission{User: "u", VHost: "/", Configure: ".*", Write: ".*", Read: ".*"})
	p := s.Principal("u", "/")
	if err := p.Check(Write, Exchange, "x"); err != nil {
		t.Fatal(err)
	}
	mustSet(t, s, Permission{User: "u", VHost: "/", Configure: ".*", Write: "^y$", Read: ".*"})
	if err := p.Check(Write, Exchange, "x"); err == nil {
		t.Fatal("a narrowed permission still allows what it allowed before")
	}
	if err := s.DeletePermission("u", "/"); err != nil {
		t.Fatal(err)
	}
	if err := p.Check(Write, Exchange, "y"); err == nil {
		t.Fatal("a cleared permission still allows")
	}
	if err := s.DeletePermission("u", "/"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("clearing twice: %v", err)
	}
}

// TestStoreSurvivesReopenAndForgets: permissions come back from the KV;
// ForgetUser and ForgetVHost remove what a deleted user or vhost had;
// GrantOnce grants a bootstrap user once, ever.
func TestStoreSurvivesReopenAndForgets(t *testing.T) {
	kv := kvtest.New()
	s := mustOpen(t, kv)
	for _, v := range []string{"/", "a/b"} {
		for _, u := range []string{"alice", "bob"} {
			mustSet(t, s, Permission{User: u, VHost: v, Configure: ".*", Write: ".*", Read: ".*"})
			if err := s.SetTopicPermission(TopicPermission{User: u, VHost: v, Exchange: "t/x", Write: "{username}", Read: ".*"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.GrantOnce("guest", "/"); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, kv)
	if n, m := len(s.Permissions()), len(s.TopicPermissions()); n != 5 || m != 4 {
		t.Fatalf("after reopening: %d permissions, %d topic permissions; want 5 and 4", n, m)
	}
	if err := s.Principal("bob", "a/b").Publish("t/x", func() []string { return []string{"bob"} }, func() bool { return true }); err != nil {
		t.Fatalf("a reloaded topic permission with a variable: %v", err)
	}
	if err := s.ForgetUser("alice"); err != nil {
		t.Fatal(err)
	}
	if err := s.ForgetVHost("a/b"); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, kv)
	var left []string
	for _, p := range s.Permissions() {
		left = append(left, p.User+"@"+p.VHost)
	}
	for _, p := range s.TopicPermissions() {
		left = append(left, "topic:"+p.User+"@"+p.VHost)
	}
	if got := strings.Join(left, " "); got != "bob@/ guest@/ topic:bob@/" {
		t.Fatalf("left after forgetting alice and a/b: %s", got)
	}
	if err := s.DeletePermission("guest", "/"); err != nil {
		t.Fatal(err)
	}
	if err := s.GrantOnce("guest", "/"); err != nil {
		t.Fatal(err)
	}
	if s.HasVHostAccessContext(context.Background(), "guest", "/") {
		t.Fatal("GrantOnce granted a cleared permission again")
	}
}

// TestStoresFollowEachOtherAsNodes: two stores over one metadata log (two
// nodes of a cluster). A permission given on one opens the vhost on the
// other at once (a lookup that misses waits for the cluster); changes
// and deletions reach the other node's connections as it applies them;
// a bootstrap user's permission cleared on one node is not given back by
// another that had not applied the clearing.
func TestStoresFollowEachOtherAsNodes(t *testing.T) {
	log := kvtest.New()
	node1, node2 := log.Node(), log.Node()
	s1, s2 := mustOpen(t, node1), mustOpen(t, node2)

	mustSet(t, s1, Permission{User: "carol", VHost: "billing", Configure: ".*", Write: ".*", Read: ".*"})
	if !s2.HasVHostAccessContext(context.Background(), "carol", "billing") {
		t.Fatal("node 2 refuses the vhost node 1 just opened to carol")
	}
	p2 := s2.Principal("carol", "billing")
	if err := p2.Check(Write, Exchange, "invoices"); err != nil {
		t.Fatal(err)
	}
	mustSet(t, s1, Permission{User: "carol", VHost: "billing", Configure: ".*", Write: "^audit$", Read: ".*"})
	if err := s1.SetTopicPermission(TopicPermission{User: "carol", VHost: "billing", Exchange: "amq.topic", Write: "^eu\\.", Read: ".*"}); err != nil {
		t.Fatal(err)
	}
	node2.CatchUp() // as it applies the log
	if err := p2.Check(Write, Exchange, "invoices"); err == nil {
		t.Fatal("node 2's connection still writes where node 1 narrowed carol's permission")
	}
	if err := p2.Publish("amq.topic", func() []string { return []string{"us.x"} }, func() bool { return true }); err == nil {
		t.Fatal("node 2 does not narrow carol's topic by node 1's topic permission")
	}
	if err := s2.DeleteTopicPermissions("carol", "billing", ""); err != nil {
		t.Fatal(err)
	}
	if err := s2.ForgetUser("carol"); err != nil {
		t.Fatal(err)
	}
	node1.CatchUp()
	if s1.HasVHostAccessContext(context.Background(), "carol", "billing") || len(s1.TopicPermissions()) != 0 {
		t.Fatal("node 1 keeps what node 2 deleted")
	}

	if err := s1.GrantOnce("guest", "/"); err != nil {
		t.Fatal(err)
	}
	if err := s1.DeletePermission("guest", "/"); err != nil {
		t.Fatal(err)
	}
	if err := s2.GrantOnce("guest", "/"); err != nil { // node 2 had applied neither
		t.Fatal(err)
	}
	node1.CatchUp()
	if s1.HasVHostAccessContext(context.Background(), "guest", "/") {
		t.Fatal("a lagging node gave guest back the permission cleared on another")
	}
}
