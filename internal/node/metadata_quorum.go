package node

import (
	"fmt"
	"slices"
)

// checkInitialCluster refuses an --initial-cluster (initial) that names
// none of the other voters this node's metadata replica already has
// (members): its data directory belongs to another cluster than the one
// it was told of, whose nodes are not its group's members; it would wait
// for good for a quorum of voters it cannot even address. It stops at
// once, saying why, before the broker waits for its metadata quorum. A
// list naming some of them passes, whatever else it names: the voters in
// the log rule, as nodes joined (--join) or removed since the cluster was
// made change them, and a node still short of a quorum says so while it
// waits (broker.Open).
func checkInitialCluster(self uint64, initial, members []uint64) error {
	others := slices.DeleteFunc(slices.Clone(members), func(m uint64) bool { return m == self })
	if len(others) == 0 || slices.ContainsFunc(others, func(m uint64) bool { return slices.Contains(initial, m) }) {
		return nil
	}
	return fmt.Errorf("node: --initial-cluster names the nodes %v, but the cluster this data directory belongs to has the voters %v; "+
		"give this node that cluster's --initial-cluster (or an empty --data-dir to make a new node)", initial, members)
}
