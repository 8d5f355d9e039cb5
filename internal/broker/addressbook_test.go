package broker

import (
	"maps"
	"path/filepath"
	"strconv"
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
