package kafka

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestCreateTopics(t *testing.T) {
	ts := startServer(t, withBrokerConfig(func(c *brokerConfig) { c.DefaultPartitions = 4 }))
	adm := ts.admin(t)
	ctx := testContext(t)

	resp, err := adm.CreateTopic(ctx, 3, 1, map[string]*string{"retention.ms": kadm.StringPtr("1234")}, "created")
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	top, err := ts.b.Topic("created")
	if err != nil {
		t.Fatal(err)
	}
	if resp.ID != kadm.TopicID(top.ID()) || resp.NumPartitions != 3 || resp.ReplicationFactor != 1 {
		t.Errorf("response %+v", resp)
	}
	if c, ok := resp.Configs["retention.ms"]; !ok || c.MaybeValue() != "1234" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Errorf("retention.ms in response: %+v", c)
	}

	if resp, err := adm.CreateTopic(ctx, -1, -1, nil, "defaults"); err != nil || resp.NumPartitions != 4 {
		t.Errorf("broker defaults: %v, %d partitions", err, resp.NumPartitions)
	}

	for _, tc := range []struct {
		name       string
		partitions int32
		rf         int16
		configs    map[string]*string
		want       *kerr.Error
	}{
		{"created", 1, 1, nil, kerr.TopicAlreadyExists},
		{"rf3", 1, 3, nil, kerr.InvalidReplicationFactor},
		{"rf0", 1, 0, nil, kerr.InvalidReplicationFactor},
		{"zero-partitions", 0, 1, nil, kerr.InvalidPartitions},
		{"bad/name", 1, 1, nil, kerr.InvalidTopicException},
		{"bad-config", 1, 1, map[string]*string{"no.such.config": kadm.StringPtr("1")}, kerr.InvalidConfig},
		{"null-config", 1, 1, map[string]*string{"retention.ms": nil}, kerr.InvalidConfig},
	} {
		_, err := adm.CreateTopic(ctx, tc.partitions, tc.rf, tc.configs, tc.name)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}

	dry, err := adm.ValidateCreateTopics(ctx, -1, -1, map[string]*string{"segment.ms": kadm.StringPtr("5000")}, "dry-run")
	if err != nil {
		t.Fatalf("validate only: %v", err)
	}
	if r, c := dry["dry-run"], dry["dry-run"].Configs["segment.ms"]; r.Err != nil || r.NumPartitions != 4 || c.MaybeValue() != "5000" {
		t.Errorf("validate-only response: %+v", r)
	}
	if _, err := ts.b.Topic("dry-run"); err == nil {
		t.Error("validate-only created the topic")
	}

	// Duplicates and manual assignments, by hand.
	c := ts.dial(t)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	dup := kmsg.NewCreateTopicsRequestTopic()
	dup.Topic, dup.NumPartitions, dup.ReplicationFactor = "twice", 1, 1
	good := kmsg.NewCreateTopicsRequestTopic()
	good.Topic, good.NumPartitions, good.ReplicationFactor = "assigned", -1, -1
	for p := int32(0); p < 2; p++ {
		good.ReplicaAssignment = append(good.ReplicaAssignment,
			kmsg.CreateTopicsRequestTopicReplicaAssignment{Partition: p, Replicas: []int32{ts.b.NodeID()}})
	}
	bad := kmsg.NewCreateTopicsRequestTopic()
	bad.Topic, bad.NumPartitions, bad.ReplicationFactor = "misassigned", -1, -1
	bad.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{{Partition: 0, Replicas: []int32{7}}}
	req.Topics = []kmsg.CreateTopicsRequestTopic{dup, dup, good, bad}
	out := c.roundTrip(req).(*kmsg.CreateTopicsResponse)
	wantCodes := []int16{kerr.InvalidRequest.Code, kerr.InvalidRequest.Code, 0, kerr.InvalidReplicaAssignment.Code}
	for i, st := range out.Topics {
		if st.ErrorCode != wantCodes[i] {
			t.Errorf("topic %d (%s): error %d, want %d", i, st.Topic, st.ErrorCode, wantCodes[i])
		}
	}
	if top, err := ts.b.Topic("assigned"); err != nil || len(top.Partitions()) != 2 {
		t.Errorf("manually assigned topic: %v", err)
	}
}

func TestDeleteTopics(t *testing.T) {
	ts := startServer(t)
	adm := ts.admin(t)
	ctx := testContext(t)
	ts.createTopic(t, "by-name", 1, nil)
	byID := ts.createTopic(t, "by-id", 1, nil)

	if _, err := adm.DeleteTopic(ctx, "by-name"); err != nil {
		t.Fatalf("delete by name: %v", err)
	}
	if _, err := adm.DeleteTopic(ctx, "by-name"); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("delete twice: %v", err)
	}

	c := ts.dial(t)
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version = 6
	req.Topics = []kmsg.DeleteTopicsRequestTopic{{TopicID: byID.ID()}, {TopicID: [16]byte{1}}}
	resp := c.roundTrip(req).(*kmsg.DeleteTopicsResponse)
	if st := resp.Topics[0]; st.ErrorCode != 0 || st.Topic == nil || *st.Topic != "by-id" {
		t.Errorf("delete by id: %+v", st)
	}
	if st := resp.Topics[1]; st.ErrorCode != kerr.UnknownTopicID.Code {
		t.Errorf("unknown id: error %d", st.ErrorCode)
	}
	if len(ts.b.Topics()) != 0 {
		t.Errorf("%d topics left", len(ts.b.Topics()))
	}

	old := kmsg.NewPtrDeleteTopicsRequest()
	old.Version = 3
	old.TopicNames = []string{"never-was"}
	if st := c.roundTrip(old).(*kmsg.DeleteTopicsResponse).Topics[0]; st.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("v3 unknown: %d", st.ErrorCode)
	}
}

func TestCreatePartitions(t *testing.T) {
	ts := startServer(t)
	adm := ts.admin(t)
	ctx := testContext(t)
	ts.createTopic(t, "grow", 2, nil)

	resp, err := adm.UpdatePartitions(ctx, 5, "grow")
	if err != nil || resp["grow"].Err != nil {
		t.Fatalf("grow: %v %v", err, resp["grow"].Err)
	}
	if top, _ := ts.b.Topic("grow"); len(top.Partitions()) != 5 {
		t.Fatalf("%d partitions", len(top.Partitions()))
	}
	resp, _ = adm.UpdatePartitions(ctx, 3, "grow")
	if !errors.Is(resp["grow"].Err, kerr.InvalidPartitions) {
		t.Errorf("shrink: %v", resp["grow"].Err)
	}
	resp, _ = adm.UpdatePartitions(ctx, 3, "missing")
	if !errors.Is(resp["missing"].Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("missing topic: %v", resp["missing"].Err)
	}
	resp, _ = adm.ValidateUpdatePartitions(ctx, 9, "grow")
	if resp["grow"].Err != nil {
		t.Errorf("validate: %v", resp["grow"].Err)
	}
	if top, _ := ts.b.Topic("grow"); len(top.Partitions()) != 5 {
		t.Errorf("validate-only changed the count to %d", len(top.Partitions()))
	}

	c := ts.dial(t)
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.Version = 3
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = "grow", 6
	rt.Assignment = []kmsg.CreatePartitionsRequestTopicAssignment{{Replicas: []int32{ts.b.NodeID(), 5}}}
	req.Topics = []kmsg.CreatePartitionsRequestTopic{rt}
	if st := c.roundTrip(req).(*kmsg.CreatePartitionsResponse).Topics[0]; st.ErrorCode != kerr.InvalidReplicaAssignment.Code {
		t.Errorf("bad assignment: error %d", st.ErrorCode)
	}
}

func TestListOffsets(t *testing.T) {
	ts := startServer(t)
	adm := ts.admin(t)
	ctx := testContext(t)
	ts.createTopic(t, "lo", 1, nil)
	cl := ts.client(t, kgo.DisableIdempotentWrite())
	base := time.Now().Add(-time.Hour).UnixMilli()
	for i := 0; i < 5; i++ {
		r := &kgo.Record{Topic: "lo", Value: []byte("v"), Timestamp: time.UnixMilli(base + int64(i)*1000)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	end, err := adm.ListEndOffsets(ctx, "lo")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := end.Lookup("lo", 0); o.Offset != 5 || o.Err != nil {
		t.Errorf("end: %+v", o)
	}
	after, err := adm.ListOffsetsAfterMilli(ctx, base+2500, "lo")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := after.Lookup("lo", 0); o.Offset != 3 || o.Timestamp != base+3000 {
		t.Errorf("after milli: %+v", o)
	}
	if _, err := mustPartition(t, ts, "lo", 0).DeleteBefore(2); err != nil {
		t.Fatal(err)
	}
	start, err := adm.ListStartOffsets(ctx, "lo")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := start.Lookup("lo", 0); o.Offset != 2 {
		t.Errorf("start: %+v", o)
	}

	c := ts.dial(t)
	list := func(version int16, ts ...int64) []kmsg.ListOffsetsResponseTopicPartition {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version = version
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "lo"
		for _, stamp := range ts {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Timestamp = stamp
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = []kmsg.ListOffsetsRequestTopic{rt}
		return c.roundTrip(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions
	}
	if p := list(7, -3)[0]; p.ErrorCode != 0 || p.Offset != 4 || p.Timestamp != base+4000 {
		t.Errorf("max timestamp: %+v", p)
	}
	if p := list(6, -3)[0]; p.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Errorf("max timestamp at v6: error %d", p.ErrorCode)
	}
	if p := list(9, -4)[0]; p.Offset != 2 {
		t.Errorf("earliest local: %+v", p)
	}
	if p := list(9, -5)[0]; p.ErrorCode != 0 || p.Offset != -1 {
		t.Errorf("latest tiered: %+v", p)
	}
	if p := list(9, base+60_000)[0]; p.ErrorCode != 0 || p.Offset != -1 {
		t.Errorf("after the last timestamp: %+v", p)
	}
	if p := list(1, -1)[0]; p.Offset != 5 {
		t.Errorf("v1 latest: %+v", p)
	}
	if ps := list(9, -1, -2); ps[0].ErrorCode != kerr.InvalidRequest.Code || ps[1].ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("duplicate partition: %+v", ps)
	}
}

func TestDeleteRecords(t *testing.T) {
	ts := startServer(t)
	adm := ts.admin(t)
	ctx := testContext(t)
	ts.createTopic(t, "dr", 1, nil)
	appendBatches(t, mustPartition(t, ts, "dr", 0), 10, 10)

	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "dr", Partition: 0, At: 4})
	resp, err := adm.DeleteRecords(ctx, os)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := resp.Lookup("dr", 0); r.Err != nil || r.LowWatermark != 4 {
		t.Fatalf("delete to 4: %+v", r)
	}
	os = kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "dr", Partition: 0, At: 11})
	resp, _ = adm.DeleteRecords(ctx, os)
	if r, _ := resp.Lookup("dr", 0); !errors.Is(r.Err, kerr.OffsetOutOfRange) {
		t.Errorf("past the end: %+v", r)
	}
	os = kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "dr", Partition: 0, At: -1})
	resp, _ = adm.DeleteRecords(ctx, os)
	if r, _ := resp.Lookup("dr", 0); r.Err != nil || r.LowWatermark != 10 {
		t.Errorf("to the high watermark: %+v", r)
	}
	if start := mustPartition(t, ts, "dr", 0).StartOffset(); start != 10 {
		t.Errorf("log start %d", start)
	}
}

func TestTopicConfigs(t *testing.T) {
	ts := startServer(t)
	adm := ts.admin(t)
	ctx := testContext(t)
	ts.createTopic(t, "cfg", 1, map[string]string{"retention.ms": "1000"})

	describe := func() map[string]kadm.Config {
		t.Helper()
		rcs, err := adm.DescribeTopicConfigs(ctx, "cfg")
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rcs.On("cfg", nil)
		if err != nil || rc.Err != nil {
			t.Fatalf("describe: %v %v", err, rc.Err)
		}
		out := map[string]kadm.Config{}
		for _, c := range rc.Configs {
			out[c.Key] = c
		}
		return out
	}
	cfgs := describe()
	if c := cfgs["retention.ms"]; c.MaybeValue() != "1000" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Errorf("retention.ms: %+v", c)
	}
	if c := cfgs["segment.bytes"]; c.Source != kmsg.ConfigSourceDefaultConfig || c.MaybeValue() == "" {
		t.Errorf("segment.bytes: %+v", c)
	}

	_, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "segment.ms", Value: kadm.StringPtr("60000")},
		{Op: kadm.DeleteConfig, Name: "retention.ms"},
	}, "cfg")
	if err != nil {
		t.Fatal(err)
	}
	cfgs = describe()
	if c := cfgs["segment.ms"]; c.MaybeValue() != "60000" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Errorf("segment.ms after set: %+v", c)
	}
	if c := cfgs["retention.ms"]; c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("retention.ms after delete: %+v", c)
	}

	// APPEND to a non-list config is refused; to cleanup.policy it works.
	resp, _ := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "segment.ms", Value: kadm.StringPtr("1")}}, "cfg")
	if r, _ := resp.On("cfg", nil); !errors.Is(r.Err, kerr.InvalidConfig) {
		t.Errorf("append to a long: %v", r.Err)
	}
	resp, _ = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: kadm.StringPtr("delete")}}, "cfg")
	if r, _ := resp.On("cfg", nil); r.Err != nil {
		t.Errorf("append delete to cleanup.policy: %v", r.Err)
	}
	if got := applyListOp("delete", ptr("compact,delete"), true); got != "delete,compact" {
		t.Errorf("append: %q", got)
	}
	if got := applyListOp("delete,compact", ptr("delete"), false); got != "compact" {
		t.Errorf("subtract: %q", got)
	}

	// AlterConfigs replaces the whole override set.
	if _, err := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "retention.bytes", Value: kadm.StringPtr("5000")}}, "cfg"); err != nil {
		t.Fatal(err)
	}
	cfgs = describe()
	if c := cfgs["segment.ms"]; c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("segment.ms survived a full replace: %+v", c)
	}
	if c := cfgs["retention.bytes"]; c.MaybeValue() != "5000" {
		t.Errorf("retention.bytes: %+v", c)
	}

	resp, _ = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("soon")}}, "cfg")
	if r, _ := resp.On("cfg", nil); !errors.Is(r.Err, kerr.InvalidConfig) {
		t.Errorf("bad value: %v", r.Err)
	}
	resp, _ = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("1")}}, "nope")
	if r, _ := resp.On("nope", nil); !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("unknown topic: %v", r.Err)
	}

	// Synonyms and types, by hand at v4.
	c := ts.dial(t)
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.Version = 4
	req.IncludeSynonyms = true
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName, rr.ConfigNames = kmsg.ConfigResourceTypeTopic, "cfg", []string{"retention.bytes", "segment.bytes"}
	req.Resources = []kmsg.DescribeConfigsRequestResource{rr}
	got := c.roundTrip(req).(*kmsg.DescribeConfigsResponse).Resources[0].Configs
	if len(got) != 2 {
		t.Fatalf("%d configs for 2 names", len(got))
	}
	for _, e := range got {
		if e.ConfigType != kmsg.ConfigTypeLong && e.ConfigType != kmsg.ConfigTypeInt || len(e.ConfigSynonyms) != 1 {
			t.Errorf("%s: type %v synonyms %+v", e.Name, e.ConfigType, e.ConfigSynonyms)
		}
		if e.Name == "segment.bytes" && e.ConfigSynonyms[0].Name != "log.segment.bytes" {
			t.Errorf("segment.bytes synonym %q", e.ConfigSynonyms[0].Name)
		}
	}
}

func TestBrokerConfigsAndCluster(t *testing.T) {
	ts := startServer(t)
	adm := ts.admin(t)
	ctx := testContext(t)

	rcs, err := adm.DescribeBrokerConfigs(ctx, ts.b.NodeID())
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]string{}
	for _, rc := range rcs {
		if rc.Err != nil {
			t.Fatalf("broker configs: %v", rc.Err)
		}
		for _, c := range rc.Configs {
			found[c.Key] = c.MaybeValue()
		}
	}
	if found["log.dirs"] != ts.b.DataDir() || found["node.id"] != "0" || found["num.partitions"] != "1" ||
		found["socket.request.max.bytes"] != fmt.Sprint(DefaultMaxRequestBytes) {
		t.Errorf("broker configs: %v", found)
	}

	c := ts.dial(t)
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.Version = 2
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, "7"
	req.Resources = []kmsg.DescribeConfigsRequestResource{rr}
	if r := c.roundTrip(req).(*kmsg.DescribeConfigsResponse).Resources[0]; r.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("another broker's configs: error %d", r.ErrorCode)
	}

	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	alter.Version = 1
	ar := kmsg.NewIncrementalAlterConfigsRequestResource()
	ar.ResourceType, ar.ResourceName = kmsg.ConfigResourceTypeBroker, "0"
	ar.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "log.retention.ms", Op: kmsg.IncrementalAlterConfigOpSet, Value: ptr("1")}}
	alter.Resources = []kmsg.IncrementalAlterConfigsRequestResource{ar}
	if r := c.roundTrip(alter).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]; r.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("alter broker config: error %d", r.ErrorCode)
	}

	cluster := c.roundTrip(kmsg.NewPtrDescribeClusterRequest()).(*kmsg.DescribeClusterResponse)
	if cluster.ClusterID != ts.b.ClusterID() || cluster.ControllerID != ts.b.NodeID() || len(cluster.Brokers) != 1 ||
		cluster.Brokers[0].Host != "127.0.0.1" || cluster.Brokers[0].Port == 0 {
		t.Errorf("cluster: %+v", cluster)
	}
	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.Version = 1
	dc.EndpointType = 2
	if r := c.roundTrip(dc).(*kmsg.DescribeClusterResponse); r.ErrorCode != kerr.MismatchedEndpointType.Code {
		t.Errorf("controllers: error %d", r.ErrorCode)
	}
}

func TestDescribeLogDirs(t *testing.T) {
	ts := startServer(t)
	adm := ts.admin(t)
	ctx := testContext(t)
	ts.createTopic(t, "ld", 2, nil)
	appendBatches(t, mustPartition(t, ts, "ld", 1), 3, 100)

	dirs, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var seen int
	dirs.Each(func(d kadm.DescribedLogDir) {
		if d.Err != nil || d.Dir != ts.b.DataDir() {
			t.Errorf("dir %q: %v", d.Dir, d.Err)
		}
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			seen++
			want := mustPartition(t, ts, p.Topic, p.Partition).Size()
			if p.Size != want {
				t.Errorf("%s/%d size %d, want %d", p.Topic, p.Partition, p.Size, want)
			}
		})
	})
	if seen != 2 {
		t.Errorf("%d partitions described", seen)
	}

	c := ts.dial(t)
	req := kmsg.NewPtrDescribeLogDirsRequest()
	req.Version = 4
	req.Topics = []kmsg.DescribeLogDirsRequestTopic{{Topic: "ld", Partitions: []int32{1, 9}}, {Topic: "nope", Partitions: []int32{0}}}
	resp := c.roundTrip(req).(*kmsg.DescribeLogDirsResponse)
	d := resp.Dirs[0]
	if len(d.Topics) != 1 || len(d.Topics[0].Partitions) != 1 || d.Topics[0].Partitions[0].Partition != 1 {
		t.Errorf("filtered: %+v", d.Topics)
	}
	if d.TotalBytes <= 0 || d.UsableBytes < 0 {
		t.Errorf("volume bytes %d/%d", d.TotalBytes, d.UsableBytes)
	}
}
