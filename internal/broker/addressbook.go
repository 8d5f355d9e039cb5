package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
)

// The address book: the cluster's nodes and their cluster addresses, as
// this node last applied them, kept in its data directory (issue 13).
//
// A node learns where a node that joined later listens, and that a node
// was removed, by applying the metadata log; and after a restart it
// applies nothing before a quorum of the metadata group tells it what is
// committed. After a whole-cluster stop of a cluster whose membership
// changed, the voters that would make that quorum may know each other
// only from the log: nodes 1 and 4 of the voters 1, 2 and 4 (node 4
// joined, node 3 removed), with node 2 down, would wait for good, node
// 1 dialling node 3 and never node 4, node 4 knowing no one. So every
// node writes down the nodes it applied, and reads them at start before
// it waits for its quorum (internal/node), as KRaft reads its voters and
// their endpoints from its log and checkpoints. An address is a hint
// (Raft membership decides who votes), so a stale book costs at most a
// wasted dial.

// addressBookFile is the address book's file in the data directory.
const addressBookFile = "cluster-nodes.json"

// ReadAddressBook returns the nodes and cluster addresses dataDir's
// address book holds; nil if it has none (a node that never served).
func ReadAddressBook(dataDir string) (map[int32]string, error) {
	data, err := os.ReadFile(filepath.Join(dataDir, addressBookFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var nodes map[int32]string
	if err := json.Unmarshal(data, &nodes); err != nil {
		return nil, fmt.Errorf("the address book %s: %w", addressBookFile, err)
	}
	return nodes, nil
}

// writeAddressBook replaces dataDir's address book with nodes, durably:
// written aside, fsynced and renamed in.
func writeAddressBook(dataDir string, nodes map[int32]string) error {
	data, err := json.Marshal(nodes)
	if err != nil {
		return err
	}
	path := filepath.Join(dataDir, addressBookFile)
	if err := writeFileSync(path+".tmp", data); err != nil {
		return err
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return err
	}
	return syncDir(dataDir)
}

// keepAddressBook writes nodes as the address book unless it holds them
// already (written, as far as this node knows).
func (b *Broker) keepAddressBook(written, nodes map[int32]string) map[int32]string {
	if maps.Equal(written, nodes) {
		return written
	}
	if err := writeAddressBook(b.cfg.DataDir, nodes); err != nil {
		b.logger.Warn("writing down the cluster's nodes failed; will try again", "err", err)
		return written
	}
	return nodes
}
