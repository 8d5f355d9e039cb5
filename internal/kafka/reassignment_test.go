package kafka

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestSingleNodeReplicaManagement: ElectLeaders needs no election,
// a reassignment to this node is a no-op and any other is refused, and
// none is ever in progress — what kafka-go's tests expect of a
// one-broker cluster.
func TestSingleNodeReplicaManagement(t *testing.T) {
	ts := startServer(t)
	ts.createTopic(t, "placed", 2, nil)
	adm := ts.admin(t)
	ctx := testCtx(t)

	elected, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"placed": {0: {}, 1: {}}, "absent": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []int32{0, 1} {
		if r := elected["placed"][p]; !errors.Is(r.Err, kerr.ElectionNotNeeded) {
			t.Errorf("placed/%d: %v, want ELECTION_NOT_NEEDED", p, r.Err)
		}
	}
	if r := elected["absent"][0]; !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("absent/0: %v", r.Err)
	}

	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("placed", 0, []int32{ts.b.NodeID()})
	req.Assign("placed", 1, []int32{ts.b.NodeID(), 7})
	req.CancelAssign("absent", 0)
	altered, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		topic     string
		partition int32
		want      *kerr.Error
	}{{"placed", 0, nil}, {"placed", 1, kerr.InvalidReplicaAssignment}, {"absent", 0, kerr.UnknownTopicOrPartition}} {
		got := altered[c.topic][c.partition].Err
		if (c.want == nil) != (got == nil) || c.want != nil && !errors.Is(got, c.want) {
			t.Errorf("%s/%d: %v, want %v", c.topic, c.partition, got, c.want)
		}
	}
	var cancel kadm.AlterPartitionAssignmentsReq
	cancel.CancelAssign("placed", 0)
	if altered, err := adm.AlterPartitionAssignments(ctx, cancel); err != nil || !errors.Is(altered["placed"][0].Err, kerr.NoReassignmentInProgress) {
		t.Errorf("cancelling: %v %v", err, altered)
	}

	listed, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"placed": {0: {}, 1: {}}})
	if err != nil || len(listed) != 0 {
		t.Fatalf("reassignments in progress: %v %v", listed, err)
	}
}
