package kafka

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/wharf-mq/wharf/internal/acl"
)

// startACLServer is a saslTestServer with the authorizer on and admin as
// its super user.
func startACLServer(t *testing.T) *saslTestServer {
	t.Helper()
	return startSASLServer(t, func(s *Server) {
		store, err := acl.Open(s.broker.Definitions())
		if err != nil {
			t.Fatal(err)
		}
		s.cfg.Authorizer = acl.NewAuthorizer(store, []string{"User:admin"}, false)
	}, withGroups(t), withTransactions(t))
}

// as is a client of the SASL listener logged in as user.
func (sts *saslTestServer) as(t *testing.T, user string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return sts.saslClient(t, plain.Auth{User: user, Pass: testUsers[user]}.AsMechanism(), opts...)
}

// grant creates ACLs as the super user.
func (sts *saslTestServer) grant(t *testing.T, b *kadm.ACLBuilder) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	results, err := kadm.NewClient(sts.as(t, "admin")).CreateACLs(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.Err != nil {
			t.Fatalf("create ACL %+v: %v", r, r.Err)
		}
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// produceErr produces one record and returns the partition's error.
func produceErr(t *testing.T, cl *kgo.Client, topic string) error {
	t.Helper()
	return cl.ProduceSync(testCtx(t), &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr()
}

func TestACLAPIsWithoutAuthorizerAreSecurityDisabled(t *testing.T) {
	ts := startServer(t)
	ctx := testCtx(t)
	results, err := ts.admin(t).CreateACLs(ctx, kadm.NewACLs().Topics("t").Allow("User:a").Operations(kadm.OpRead))
	if err != nil || len(results) != 1 || !errors.Is(results[0].Err, kerr.SecurityDisabled) {
		t.Fatalf("CreateAcls without an authorizer: %v %+v", err, results)
	}
	resp, err := describeACLs(ctx, ts.client(t), kmsg.ACLResourceTypeAny, nil, kmsg.ACLResourcePatternTypeAny)
	if err != nil || resp.ErrorCode != kerr.SecurityDisabled.Code {
		t.Fatalf("DescribeAcls without an authorizer: %v %v", err, resp)
	}
}

// describeACLs asks for every binding of a resource pattern.
func describeACLs(ctx context.Context, cl *kgo.Client, rt kmsg.ACLResourceType, name *string, pt kmsg.ACLResourcePatternType) (*kmsg.DescribeACLsResponse, error) {
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourceName, req.ResourcePatternType = rt, name, pt
	req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	return req.RequestWith(ctx, cl)
}

// TestACLDenials: the denial cases over a real client: without
// READ on a topic a fetch gets TOPIC_AUTHORIZATION_FAILED; without READ
// on the group, joining gets GROUP_AUTHORIZATION_FAILED; a DENY beats an
// ALLOW; no ACL means denied; the super user may do everything.
func TestACLDenials(t *testing.T) {
	sts := startACLServer(t)
	for _, topic := range []string{"orders-eu", "orders-secret", "payments"} {
		sts.createTopic(t, topic, 1, nil)
	}
	sts.grant(t, kadm.NewACLs().Topics("orders-").ResourcePatternType(kadm.ACLPatternPrefixed).
		Allow("User:alice").Operations(kadm.OpWrite))
	sts.grant(t, kadm.NewACLs().Topics("orders-secret").Deny("User:alice").Operations(kadm.OpWrite))
	sts.grant(t, kadm.NewACLs().Topics("orders-eu").Allow("User:bob").Operations(kadm.OpRead))

	alice := sts.as(t, "alice", kgo.DisableIdempotentWrite())
	if err := produceErr(t, alice, "orders-eu"); err != nil {
		t.Fatalf("alice to orders-eu (prefixed ALLOW): %v", err)
	}
	if err := produceErr(t, alice, "orders-secret"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice to orders-secret (DENY beats ALLOW): %v", err)
	}
	if err := produceErr(t, alice, "payments"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice to payments (no ACL): %v", err)
	}

	// bob may read orders-eu but not payments.
	fetch := func(topic string) int16 {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.MaxWaitMillis, req.MaxBytes = 12, 0, 1<<20
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = topic
		if tp, err := sts.b.Topic(topic); err == nil {
			ft.TopicID = tp.ID()
		}
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes = 1 << 20
		ft.Partitions = []kmsg.FetchRequestTopicPartition{fp}
		req.Topics = []kmsg.FetchRequestTopic{ft}
		resp, err := req.RequestWith(testCtx(t), sts.as(t, "bob"))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	if code := fetch("orders-eu"); code != 0 {
		t.Fatalf("bob fetching orders-eu: %v", kerr.ErrorForCode(code))
	}
	if code := fetch("payments"); code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("bob fetching payments: %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}

	// A group consumer needs READ on the group too.
	consumer := sts.as(t, "bob", kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("orders-eu"))
	fetches := consumer.PollFetches(testCtx(t))
	var groupErr error
	fetches.EachError(func(_ string, _ int32, err error) { groupErr = err })
	if !errors.Is(groupErr, kerr.GroupAuthorizationFailed) {
		t.Fatalf("joining group billing without READ on it: %v", groupErr)
	}
	sts.grant(t, kadm.NewACLs().Groups("billing").Allow("User:bob").Operations(kadm.OpRead))
	recs := sts.as(t, "bob", kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("orders-eu"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())).PollRecords(testCtx(t), 1)
	if recs.Err() != nil || len(recs.Records()) != 1 {
		t.Fatalf("bob with READ on the group: %v, %d records", recs.Err(), len(recs.Records()))
	}

	// The super user needs no ACL.
	if err := produceErr(t, sts.as(t, "admin"), "payments"); err != nil {
		t.Fatalf("super user: %v", err)
	}
	if !sts.logs.contains("authorization denied") {
		t.Fatal("denials are not logged")
	}
}

// TestMetadataShowsOnlyDescribableTopics and reports each principal's
// authorized operations (KIP-430).
func TestMetadataShowsOnlyDescribableTopics(t *testing.T) {
	sts := startACLServer(t)
	sts.createTopic(t, "visible", 1, nil)
	sts.createTopic(t, "hidden", 1, nil)
	sts.grant(t, kadm.NewACLs().Topics("visible").Allow("User:bob").Operations(kadm.OpRead))

	req := kmsg.NewPtrMetadataRequest()
	req.IncludeTopicAuthorizedOperations = true
	resp, err := req.RequestWith(testCtx(t), sts.as(t, "bob"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, topic := range resp.Topics {
		names = append(names, *topic.Topic)
	}
	if !slices.Equal(names, []string{"visible"}) {
		t.Fatalf("bob sees %v", names)
	}
	if ops := resp.Topics[0].AuthorizedOperations; ops != 1<<kmsg.ACLOperationRead|1<<kmsg.ACLOperationDescribe {
		t.Fatalf("bob's operations on visible: %b", ops)
	}

	req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("hidden")}, {Topic: kmsg.StringPtr("absent")}}
	resp, err = req.RequestWith(testCtx(t), sts.as(t, "bob"))
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range resp.Topics {
		if topic.ErrorCode != kerr.TopicAuthorizationFailed.Code {
			t.Errorf("%s asked for by name: %v, want TOPIC_AUTHORIZATION_FAILED whether or not it exists",
				*topic.Topic, kerr.ErrorForCode(topic.ErrorCode))
		}
	}
}

// TestAnonymousOnThePlaintextListener: without ACLs an unauthenticated
// client gets nothing; an ACL for User:ANONYMOUS lets it in.
func TestAnonymousOnThePlaintextListener(t *testing.T) {
	sts := startACLServer(t)
	sts.createTopic(t, "open", 1, nil)
	anon := sts.client(t, kgo.DisableIdempotentWrite(), kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))
	if err := produceErr(t, anon, "open"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("anonymous without ACLs: %v", err)
	}
	sts.grant(t, kadm.NewACLs().Topics("open").Allow("User:ANONYMOUS").Operations(kadm.OpWrite))
	if err := produceErr(t, anon, "open"); err != nil {
		t.Fatalf("anonymous with an ACL: %v", err)
	}
}

// TestIdempotentAndTransactionalProducersNeedTheirACLs: InitProducerId
// needs WRITE on some topic (or IDEMPOTENT_WRITE on the cluster) for an
// idempotent producer and WRITE on the transactional id for a
// transactional one.
func TestIdempotentAndTransactionalProducersNeedTheirACLs(t *testing.T) {
	sts := startACLServer(t)
	sts.createTopic(t, "events", 1, nil)
	init := func(txnID *string) int16 {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = txnID, 10000
		resp, err := req.RequestWith(testCtx(t), sts.as(t, "alice"))
		var kerrErr *kerr.Error
		if errors.As(err, &kerrErr) { // franz-go's FindCoordinator for the id failed
			return kerrErr.Code
		}
		if err != nil {
			t.Fatal(err)
		}
		return resp.ErrorCode
	}
	if code := init(nil); code != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("idempotent without WRITE anywhere: %v", kerr.ErrorForCode(code))
	}
	sts.grant(t, kadm.NewACLs().Topics("events").Allow("User:alice").Operations(kadm.OpWrite))
	if code := init(nil); code != 0 {
		t.Fatalf("idempotent with WRITE on events: %v", kerr.ErrorForCode(code))
	}
	if code := init(kmsg.StringPtr("tx-1")); code != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatalf("transactional without WRITE on tx-1: %v", kerr.ErrorForCode(code))
	}
	sts.grant(t, kadm.NewACLs().TransactionalIDs("tx-").ResourcePatternType(kadm.ACLPatternPrefixed).
		Allow("User:alice").Operations(kadm.OpWrite))
	if code := init(kmsg.StringPtr("tx-1")); code != 0 {
		t.Fatalf("transactional with WRITE on tx-: %v", kerr.ErrorForCode(code))
	}
}

// TestACLAPIs: create (with Kafka's validation), describe with MATCH and
// ANY filters, delete; only a principal with ALTER on the cluster may
// change them.
func TestACLAPIs(t *testing.T) {
	sts := startACLServer(t)
	ctx := testCtx(t)

	sts.grant(t, kadm.NewACLs().Topics("orders", "*").Allow("User:alice").AllowHosts("127.0.0.1").Operations(kadm.OpRead, kadm.OpWrite))
	sts.grant(t, kadm.NewACLs().Topics("ord").ResourcePatternType(kadm.ACLPatternPrefixed).Deny("User:bob").Operations(kadm.OpAll))

	req := kmsg.NewPtrCreateACLsRequest()
	for _, c := range []kmsg.CreateACLsRequestCreation{
		{ResourceType: kmsg.ACLResourceTypeCluster, ResourceName: "other", ResourcePatternType: kmsg.ACLResourcePatternTypeLiteral,
			Principal: "User:x", Host: "*", Operation: kmsg.ACLOperationAlter, PermissionType: kmsg.ACLPermissionTypeAllow},
		{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: "t", ResourcePatternType: kmsg.ACLResourcePatternTypeLiteral,
			Principal: "x", Host: "*", Operation: kmsg.ACLOperationRead, PermissionType: kmsg.ACLPermissionTypeAllow},
		{ResourceType: kmsg.ACLResourceTypeDelegationToken, ResourceName: "t", ResourcePatternType: kmsg.ACLResourcePatternTypeLiteral,
			Principal: "User:x", Host: "*", Operation: kmsg.ACLOperationDescribe, PermissionType: kmsg.ACLPermissionTypeAllow},
	} {
		req.Creations = append(req.Creations, c)
	}
	resp, err := req.RequestWith(ctx, sts.as(t, "admin"))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range resp.Results {
		if r.ErrorCode != kerr.InvalidRequest.Code || r.ErrorMessage == nil {
			t.Errorf("creation %d: %v %v, want INVALID_REQUEST with a message", i, kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
		}
	}

	// MATCH finds every binding that applies to topic "orders", ANY
	// only those named exactly so.
	count := func(pt kmsg.ACLResourcePatternType) int {
		resp, err := describeACLs(ctx, sts.as(t, "admin"), kmsg.ACLResourceTypeTopic, kmsg.StringPtr("orders"), pt)
		if err != nil || resp.ErrorCode != 0 {
			t.Fatalf("describe: %v %v", err, resp)
		}
		n := 0
		for _, r := range resp.Resources {
			n += len(r.ACLs)
		}
		return n
	}
	if n := count(kmsg.ACLResourcePatternTypeMatch); n != 5 { // alice READ+WRITE on orders and on *, bob's prefixed DENY
		t.Fatalf("MATCH orders found %d bindings", n)
	}
	if n := count(kmsg.ACLResourcePatternTypeAny); n != 2 {
		t.Fatalf("ANY orders found %d bindings", n)
	}

	// Only ALTER on the cluster may create.
	denied, err := kadm.NewClient(sts.as(t, "alice")).CreateACLs(ctx, kadm.NewACLs().Topics("x").Allow("User:alice").Operations(kadm.OpAll))
	if err != nil || !errors.Is(denied[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice creating ACLs: %v %+v", err, denied)
	}

	del := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	f.Principal, f.Operation, f.PermissionType = kmsg.StringPtr("User:alice"), kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	del.Filters = []kmsg.DeleteACLsRequestFilter{f}
	deleted, err := del.RequestWith(ctx, sts.as(t, "admin"))
	if err != nil || len(deleted.Results) != 1 || len(deleted.Results[0].MatchingACLs) != 4 {
		t.Fatalf("deleting alice's ACLs: %v %+v", err, deleted)
	}
	if n := count(kmsg.ACLResourcePatternTypeMatch); n != 1 {
		t.Fatalf("after the delete MATCH orders finds %d bindings", n)
	}
}
