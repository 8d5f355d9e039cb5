package node

import "testing"

// TestCheckInitialCluster: an --initial-cluster naming any other voter of
// the metadata group passes, whatever nodes joined or left since; one
// naming none of them is another cluster's, refused. Node 3 asks.
func TestCheckInitialCluster(t *testing.T) {
	for _, tc := range []struct {
		name             string
		initial, members []uint64
		refused          bool
	}{
		{"the same nodes", []uint64{1, 2, 3}, []uint64{1, 2, 3}, false},
		{"a node joined since", []uint64{1, 2, 3}, []uint64{1, 2, 3, 4}, false},
		{"two removed and two joined", []uint64{1, 2, 3}, []uint64{1, 3, 4, 5}, false},
		{"more nodes named than voters", []uint64{1, 2, 3, 4, 5}, []uint64{1, 2, 3}, false},
		{"another cluster", []uint64{3, 7, 8}, []uint64{1, 2, 3}, true},
		{"one other voter of many", []uint64{3, 4}, []uint64{1, 2, 3, 4, 5}, false},
		{"a cluster of one", []uint64{3}, []uint64{3}, false},
		{"only itself of three", []uint64{3}, []uint64{1, 2, 3}, true},
	} {
		err := checkInitialCluster(3, tc.initial, tc.members)
		if (err != nil) != tc.refused {
			t.Errorf("%s: initial %v, voters %v: %v, want refused %v", tc.name, tc.initial, tc.members, err, tc.refused)
		}
	}
}
