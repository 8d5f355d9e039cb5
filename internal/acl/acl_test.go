package acl

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/kvtest"
)

const (
	topic   = kmsg.ACLResourceTypeTopic
	group   = kmsg.ACLResourceTypeGroup
	literal = kmsg.ACLResourcePatternTypeLiteral
	prefix  = kmsg.ACLResourcePatternTypePrefixed
	allow   = kmsg.ACLPermissionTypeAllow
	deny    = kmsg.ACLPermissionTypeDeny

	read     = kmsg.ACLOperationRead
	write    = kmsg.ACLOperationWrite
	describe = kmsg.ACLOperationDescribe
)

func bind(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType, principal, host string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) Binding {
	return Binding{rt, name, pt, principal, host, op, perm}
}

func mustCreate(t *testing.T, s *Store, bindings ...Binding) {
	t.Helper()
	for i, err := range s.Create(bindings) {
		if err != nil {
			t.Fatalf("create %v: %v", bindings[i], err)
		}
	}
}

func openStore(t *testing.T, kv KV) *Store {
	t.Helper()
	s, err := Open(kv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestAuthorizeFollowsKafkasRules walks the rules of the package comment.
func TestAuthorizeFollowsKafkasRules(t *testing.T) {
	s := openStore(t, kvtest.New())
	mustCreate(t, s,
		bind(topic, "orders", literal, "User:alice", "*", read, allow),
		bind(topic, "logs-", prefix, "User:*", "*", write, allow),
		bind(topic, "logs-secret", literal, "User:bob", "*", write, deny),
		bind(topic, "*", literal, "User:carol", "10.0.0.5", kmsg.ACLOperationAll, allow),
		bind(topic, "orders", literal, "User:dave", "*", read, allow),
		bind(topic, "orders", literal, "User:dave", "*", describe, deny),
		bind(group, "billing", literal, "User:alice", "*", read, allow),
		bind(topic, "configs", literal, "User:alice", "*", kmsg.ACLOperationAlterConfigs, allow),
	)
	a := NewAuthorizer(s, []string{"User:root"}, false)
	for _, c := range []struct {
		principal, host string
		op              kmsg.ACLOperation
		rt              kmsg.ACLResourceType
		name            string
		want            bool
	}{
		{"User:alice", "127.0.0.1", read, topic, "orders", true},
		{"User:alice", "127.0.0.1", describe, topic, "orders", true}, // READ implies DESCRIBE
		{"User:alice", "127.0.0.1", write, topic, "orders", false},
		{"User:bob", "127.0.0.1", read, topic, "orders", false},
		{"User:bob", "127.0.0.1", write, topic, "logs-app", true},     // prefix, User:*
		{"User:bob", "127.0.0.1", write, topic, "logs-secret", false}, // DENY beats ALLOW
		{"User:eve", "127.0.0.1", write, topic, "logs-secret", true},  // the DENY is bob's
		{"User:eve", "127.0.0.1", write, topic, "log", false},         // not under the prefix
		{"User:carol", "10.0.0.5", kmsg.ACLOperationDelete, topic, "anything", true},
		{"User:carol", "10.0.0.6", kmsg.ACLOperationDelete, topic, "anything", false}, // another host
		{"User:dave", "127.0.0.1", read, topic, "orders", true},                       // DENY DESCRIBE does not deny READ
		{"User:dave", "127.0.0.1", describe, topic, "orders", false},                  // ... but DESCRIBE
		{"User:alice", "127.0.0.1", read, group, "billing", true},
		{"User:alice", "127.0.0.1", read, group, "orders", false}, // a topic's ACL is not a group's
		{"User:alice", "127.0.0.1", kmsg.ACLOperationDescribeConfigs, topic, "configs", true},
		{"User:alice", "127.0.0.1", describe, topic, "configs", false}, // ALTER_CONFIGS implies only DESCRIBE_CONFIGS
		{"User:root", "127.0.0.1", kmsg.ACLOperationAlter, kmsg.ACLResourceTypeCluster, ClusterName, true},
		{"User:ANONYMOUS", "127.0.0.1", describe, topic, "unbound", false}, // no ACL: denied
	} {
		if got := a.Authorize(c.principal, c.host, c.op, c.rt, c.name); got != c.want {
			t.Errorf("%s from %s: %s on %s %s = %v, want %v", c.principal, c.host, c.op, c.rt, c.name, got, c.want)
		}
	}

	s = openStore(t, kvtest.New())
	mustCreate(t, s, bind(topic, "orders", literal, "User:alice", "*", read, allow))
	open := NewAuthorizer(s, nil, true)
	if !open.Authorize("User:ANONYMOUS", "1.2.3.4", read, topic, "unbound") || open.Authorize("User:eve", "1.2.3.4", read, topic, "orders") {
		t.Error("allow.everyone.if.no.acl.found should open only resources without a binding")
	}
}

func TestAuthorizeAny(t *testing.T) {
	s := openStore(t, kvtest.New())
	a := NewAuthorizer(s, nil, false)
	if a.AuthorizeAny("User:alice", "h", write, topic) {
		t.Fatal("no bindings, yet allowed")
	}
	mustCreate(t, s, bind(topic, "a-", prefix, "User:alice", "*", write, allow))
	if !a.AuthorizeAny("User:alice", "h", write, topic) {
		t.Fatal("WRITE on a- topics does not count")
	}
	mustCreate(t, s, bind(topic, "a", prefix, "User:alice", "*", write, deny))
	if a.AuthorizeAny("User:alice", "h", write, topic) {
		t.Fatal("a DENY covering every allowed topic still allows")
	}
	mustCreate(t, s, bind(topic, "b", literal, "User:*", "*", write, allow))
	if !a.AuthorizeAny("User:alice", "h", write, topic) {
		t.Fatal("WRITE on topic b does not count")
	}
}

func TestFilters(t *testing.T) {
	s := openStore(t, kvtest.New())
	bs := []Binding{
		bind(topic, "orders", literal, "User:alice", "*", read, allow),
		bind(topic, "*", literal, "User:bob", "*", read, allow),
		bind(topic, "ord", prefix, "User:carol", "*", read, allow),
		bind(topic, "other", literal, "User:dave", "*", read, deny),
		bind(group, "orders", literal, "User:alice", "*", read, allow),
	}
	mustCreate(t, s, bs...)
	name := func(s string) *string { return &s }
	for _, c := range []struct {
		filter Filter
		want   []int
	}{
		{Filter{topic, name("orders"), kmsg.ACLResourcePatternTypeMatch, nil, nil, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny}, []int{0, 1, 2}},
		{Filter{topic, name("orders"), kmsg.ACLResourcePatternTypeAny, nil, nil, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny}, []int{0}},
		{Filter{kmsg.ACLResourceTypeAny, name("orders"), literal, nil, nil, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny}, []int{0, 4}},
		{Filter{topic, nil, prefix, nil, nil, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny}, []int{2}},
		{Filter{kmsg.ACLResourceTypeAny, nil, kmsg.ACLResourcePatternTypeAny, name("User:alice"), nil, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny}, []int{0, 4}},
		{Filter{kmsg.ACLResourceTypeAny, nil, kmsg.ACLResourcePatternTypeAny, nil, nil, kmsg.ACLOperationAny, deny}, []int{3}},
	} {
		got, err := s.Describe(c.filter)
		if err != nil {
			t.Fatal(err)
		}
		var want []Binding
		for _, i := range c.want {
			want = append(want, bs[i])
		}
		if len(got) != len(want) {
			t.Errorf("filter %+v: got %v, want %v", c.filter, got, want)
			continue
		}
		for _, w := range want {
			found := false
			for _, g := range got {
				found = found || g == w
			}
			if !found {
				t.Errorf("filter %+v: %v missing from %v", c.filter, w, got)
			}
		}
	}
	if _, err := s.Describe(Filter{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("a filter of UNKNOWNs: %v", err)
	}
}

func TestValidate(t *testing.T) {
	ok := bind(topic, "t", literal, "User:a", "*", read, allow)
	for change, want := range map[string]func(*Binding){
		"Invalid resourceType":                func(b *Binding) { b.ResourceType = kmsg.ACLResourceTypeAny },
		"no delegation tokens":                func(b *Binding) { b.ResourceType = kmsg.ACLResourceTypeDelegationToken },
		"Invalid patternType":                 func(b *Binding) { b.PatternType = kmsg.ACLResourcePatternTypeMatch },
		"Invalid operation":                   func(b *Binding) { b.Operation = kmsg.ACLOperationAny },
		"Invalid permissionType":              func(b *Binding) { b.Permission = kmsg.ACLPermissionTypeAny },
		"Resource name should not be empty":   func(b *Binding) { b.ResourceName = "" },
		"The only valid name for the CLUSTER": func(b *Binding) { b.ResourceType = kmsg.ACLResourceTypeCluster },
		"Could not parse principal":           func(b *Binding) { b.Principal = "alice" },
		"Invalid host":                        func(b *Binding) { b.Host = "example.com" },
	} {
		b := ok
		want(&b)
		if err := b.Validate(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), change) {
			t.Errorf("%+v: %v, want %q", b, err, change)
		}
	}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestStorePersistsAndDeletes(t *testing.T) {
	kv := kvtest.New()
	s := openStore(t, kv)
	b1 := bind(topic, "a/b,c", literal, "User:x", "::1", read, allow)
	b2 := bind(group, "g", prefix, "User:y", "*", kmsg.ACLOperationAll, deny)
	mustCreate(t, s, b1, b2, b1) // creating one twice is no error
	s = openStore(t, kv)
	all, _ := s.Describe(Filter{kmsg.ACLResourceTypeAny, nil, kmsg.ACLResourcePatternTypeAny, nil, nil, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny})
	if len(all) != 2 {
		t.Fatalf("after a reopen: %v", all)
	}
	deleted, errs := s.Delete([]Filter{{group, nil, kmsg.ACLResourcePatternTypeAny, nil, nil, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny}})
	if errs[0] != nil || len(deleted[0]) != 1 || deleted[0][0] != b2 {
		t.Fatalf("delete: %v %v", deleted, errs)
	}
	s = openStore(t, kv)
	if all, _ := s.Describe(Filter{kmsg.ACLResourceTypeAny, nil, kmsg.ACLResourcePatternTypeAny, nil, nil, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny}); len(all) != 1 || all[0] != b1 {
		t.Fatalf("after delete and reopen: %v", all)
	}
}

func TestParseSuperUsers(t *testing.T) {
	got, err := ParseSuperUsers("User:alice; User:bob;")
	if err != nil || strings.Join(got, ",") != "User:alice,User:bob" {
		t.Fatalf("%v %v", got, err)
	}
	if _, err := ParseSuperUsers("alice"); err == nil {
		t.Fatal("a super user without a type was accepted")
	}
}

// TestStoresFollowEachOtherAsNodes: two stores over one metadata log (two
// nodes of a cluster). A DENY made on one node authorizes on the other
// once that node applies it; a delete on a node that has not applied a
// binding yet still finds it.
func TestStoresFollowEachOtherAsNodes(t *testing.T) {
	log := kvtest.New()
	node1, node2 := log.Node(), log.Node()
	s1, s2 := openStore(t, node1), openStore(t, node2)
	authz1 := NewAuthorizer(s1, nil, false)

	mustCreate(t, s1, bind(topic, "orders", literal, "User:bob", "*", read, allow))
	if !authz1.Authorize("User:bob", "10.0.0.1", read, topic, "orders") {
		t.Fatal("node 1 denies what it allowed itself")
	}
	mustCreate(t, s2, bind(topic, "orders", literal, "User:bob", "*", read, deny))
	node1.CatchUp() // as it applies the log
	if authz1.Authorize("User:bob", "10.0.0.1", read, topic, "orders") {
		t.Fatal("node 1 allows what node 2 denied")
	}

	mustCreate(t, s1, bind(group, "billing", literal, "User:bob", "*", read, allow))
	deleted, errs := s2.Delete([]Filter{{group, nil, kmsg.ACLResourcePatternTypeAny, nil, nil, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny}})
	if errs[0] != nil || len(deleted[0]) != 1 {
		t.Fatalf("node 2 deleting the group binding node 1 just made: %v %v", deleted, errs)
	}
	node1.CatchUp()
	if authz1.Authorize("User:bob", "10.0.0.1", read, group, "billing") {
		t.Fatal("node 1 still allows a binding node 2 deleted")
	}
}
