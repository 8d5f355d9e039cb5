package broker

import (
	"context"
	"errors"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestAddressBookFollowsMembership: every node writes the cluster's
// nodes and their cluster addresses into its data directory as it
// applies them: a node that joins is added, with its address, and a node
// removed is taken out, so that each node finds them at its next start
// before it has a quorum to apply anything (internal/node).
func TestAddressBookFollowsMembership(t *testing.T) {
	c := newTestCluster(t, 3)
	controller := c.broker(c.leader())
	if _, _, err := controller.AddNode(4, "h4:19301"); err != nil {
		t.Fatal(err)
	}
	c.waitForBooks(map[int32]string{1: "", 2: "", 3: "", 4: "h4:19301"})
	if err := controller.RemoveNode(4); err != nil {
		t.Fatal(err)
	}
	c.waitForBooks(map[int32]string{1: "", 2: "", 3: ""})
}

// waitForBooks waits until every running node's address book holds want.
func (c *testCluster) waitForBooks(want map[int32]string) {
	c.t.Helper()
	for id := range c.nodes {
		dir := filepath.Join(c.base, "node"+strconv.Itoa(int(id)))
		c.waitFor("node "+strconv.Itoa(int(id))+"'s address book", func() bool {
			book, err := ReadAddressBook(dir)
			return err == nil && maps.Equal(book, want)
		})
	}
}

// TestRemoveNodeRunsTheRemovalHook: a removal first runs what another
// core installed (OnRemoveNode) for the node; its refusal refuses the
// removal, ErrNodeHoldsReplicas with its reason, the node still a member.
func TestRemoveNodeRunsTheRemovalHook(t *testing.T) {
	c := newTestCluster(t, 3)
	controller := c.broker(c.leader())
	if _, _, err := controller.AddNode(4, "h4:19301"); err != nil {
		t.Fatal(err)
	}
	refuse := errors.New("is the only member of quorum queues \"q\"")
	var asked []int32
	controller.OnRemoveNode(func(ctx context.Context, id int32) error {
		asked = append(asked, id)
		if len(asked) == 1 {
			return refuse
		}
		return nil
	})
	err := controller.RemoveNode(4)
	if !errors.Is(err, ErrNodeHoldsReplicas) || !strings.Contains(err.Error(), refuse.Error()) {
		t.Fatalf("removal refused by the hook: %v", err)
	}
	if _, ok := controller.ClusterNodes()[4]; !ok {
		t.Fatal("node 4 removed although the hook refused")
	}
	if err := controller.RemoveNode(4); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(asked, []int32{4, 4}) {
		t.Fatalf("the hook was asked for %v, want node 4 twice", asked)
	}
	c.waitForBooks(map[int32]string{1: "", 2: "", 3: ""})
}
