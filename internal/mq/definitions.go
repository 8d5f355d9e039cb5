package mq

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// Definition store keys. Every name is path-escaped, so '/' inside a name
// cannot be confused with the separator.
const (
	keyPrefix         = "mq/"
	vhostKeyPrefix    = keyPrefix + "vhost/"
	exchangeKeyPrefix = keyPrefix + "exchange/"
	queueKeyPrefix    = keyPrefix + "queue/"
	bindingKeyPrefix  = keyPrefix + "binding/"
	policyKeyPrefix   = keyPrefix + "policy/"
)

func esc(s string) string { return url.PathEscape(s) }

func vhostKey(name string) string { return vhostKeyPrefix + esc(name) }

func exchangeKey(vhost, name string) string {
	return exchangeKeyPrefix + esc(vhost) + "/" + esc(name)
}

func queueKey(vhost, name string) string { return queueKeyPrefix + esc(vhost) + "/" + esc(name) }

// bindingKey names a binding by all of its identity: source, destination,
// key and arguments (hashed: they can be long).
func bindingKey(vhost string, b bindingRecord) string {
	sum := sha256.Sum256(b.Args)
	return bindingKeyPrefix + esc(vhost) + "/" + esc(b.Source) + "/" + b.DestKind + "/" + esc(b.Destination) +
		"/" + esc(b.Key) + "/" + hex.EncodeToString(sum[:8])
}

type vhostRecord struct {
	Name string `json:"name"`
}

type exchangeRecord struct {
	VHost      string `json:"vhost"`
	Name       string `json:"name"`
	Type       string `json:"type"`
	AutoDelete bool   `json:"auto_delete,omitempty"`
	Internal   bool   `json:"internal,omitempty"`
	Args       []byte `json:"args,omitempty"` // amqpwire.AppendTable encoding, so field types survive
}

type queueRecord struct {
	VHost string `json:"vhost"`
	Name  string `json:"name"`
	ID    string `json:"id"` // storage directory under DataDir/queues
	// Node is the cluster node the queue lives on (0 on a single node:
	// this one, and for a quorum queue of a cluster).
	Node int32 `json:"node,omitempty"`
	// Members and Group are a quorum queue's nodes and Raft group in a
	// cluster (quorum_cluster.go).
	Members []int32 `json:"members,omitempty"`
	Group   uint64  `json:"group,omitempty"`
	// Target is the members a grow or shrink in progress moves the
	// group to (quorum_members.go); nil when none is.
	Target []int32 `json:"target,omitempty"`
	// Change counts the membership changes written (grow or shrink):
	// the leader's record of a change done keeps it, so a record with a
	// lower count than a change written shows that change's write
	// ignored, the record having changed since it was read
	// (quorum_members.go).
	Change uint64 `json:"change,omitempty"`
	// Stream is a stream queue's topic (no storage directory then).
	Stream     string `json:"stream,omitempty"`
	AutoDelete bool   `json:"auto_delete,omitempty"`
	Args       []byte `json:"args,omitempty"`
	// Exclusive marks an exclusive (so transient) classic queue,
	// recorded in a cluster only, so that every node routes to it
	// (exclusive_cluster.go).
	Exclusive bool `json:"exclusive,omitempty"`
}

// Destination kinds of a binding record.
const (
	destQueue    = "q"
	destExchange = "x"
)

type bindingRecord struct {
	VHost       string `json:"vhost"`
	Source      string `json:"source"`
	DestKind    string `json:"dest_kind"`
	Destination string `json:"destination"`
	Key         string `json:"key"`
	Args        []byte `json:"args,omitempty"`
	// Seq orders bindings by creation, so that they are added back in
	// that order at Open: an x-consistent-hash exchange's buckets follow
	// it. Not part of the binding's identity (or key).
	Seq uint64 `json:"seq,omitempty"`
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only plain structs are marshalled
	}
	return b
}

func encodeArgs(t amqpwire.Table) ([]byte, error) {
	if len(t) == 0 {
		return nil, nil
	}
	return amqpwire.AppendTable(nil, t)
}

func decodeArgs(b []byte) (amqpwire.Table, error) {
	if len(b) == 0 {
		return nil, nil
	}
	t, _, err := amqpwire.ReadTable(b)
	return t, err
}

// loadedDefinitions is the content of the definition store, grouped.
type loadedDefinitions struct {
	vhosts    []vhostRecord
	exchanges []exchangeRecord
	queues    []queueRecord
	bindings  []bindingRecord
	policies  []policyRecord
}

func loadDefinitions(store DefinitionStore) (*loadedDefinitions, error) {
	d := &loadedDefinitions{}
	err := store.Load(func(key string, value []byte) error {
		var err error
		switch {
		case !strings.HasPrefix(key, keyPrefix):
			return nil // another core's key
		case strings.HasPrefix(key, vhostKeyPrefix):
			var r vhostRecord
			if err = json.Unmarshal(value, &r); err == nil {
				d.vhosts = append(d.vhosts, r)
			}
		case strings.HasPrefix(key, exchangeKeyPrefix):
			var r exchangeRecord
			if err = json.Unmarshal(value, &r); err == nil {
				d.exchanges = append(d.exchanges, r)
			}
		case strings.HasPrefix(key, queueKeyPrefix):
			var r queueRecord
			if err = json.Unmarshal(value, &r); err == nil {
				d.queues = append(d.queues, r)
			}
		case strings.HasPrefix(key, policyKeyPrefix):
			var r policyRecord
			if err = json.Unmarshal(value, &r); err == nil {
				d.policies = append(d.policies, r)
			}
		case strings.HasPrefix(key, bindingKeyPrefix):
			var r bindingRecord
			if err = json.Unmarshal(value, &r); err == nil {
				d.bindings = append(d.bindings, r)
			}
		}
		if err != nil {
			return fmt.Errorf("mq: definition %q: %w", key, err)
		}
		return nil
	})
	return d, err
}

// load rebuilds the registry from the definition store: vhosts, then
// exchanges, queues (opening their logs) and bindings. Bindings whose ends
// are gone (a crash between two store writes) are dropped.
func (r *Registry) load() error {
	d, err := loadDefinitions(r.defs)
	if err != nil {
		return err
	}
	if len(d.vhosts) == 0 {
		if err := r.defs.Put(vhostKey(DefaultVHost), mustJSON(vhostRecord{Name: DefaultVHost})); err != nil {
			return fmt.Errorf("mq: store vhost: %w", err)
		}
		d.vhosts = append(d.vhosts, vhostRecord{Name: DefaultVHost})
	}
	for _, vr := range d.vhosts {
		r.vhosts[vr.Name] = newVHost(r, vr.Name)
	}
	r.loadPolicies(d.policies)
	for _, xr := range d.exchanges {
		v := r.vhosts[xr.VHost]
		x, err := exchangeFromRecord(xr)
		if err != nil {
			return fmt.Errorf("mq: exchange %q arguments: %w", xr.Name, err)
		}
		if v == nil || x == nil {
			r.logger.Warn("mq: dropping exchange definition", "vhost", xr.VHost, "exchange", xr.Name, "type", xr.Type)
			continue
		}
		v.exchanges[xr.Name] = x
	}
	for _, v := range r.vhosts {
		for _, x := range v.exchanges {
			v.applyExchangePolicyLocked(x) // no other goroutine sees v yet
		}
	}
	live := make(map[string]bool)
	for _, qr := range d.queues {
		v := r.vhosts[qr.VHost]
		if v == nil {
			continue
		}
		q, local, err := v.queueFromRecord(qr)
		if err != nil {
			return err
		}
		if q != nil {
			v.queues[qr.Name] = q
		}
		if local {
			live[qr.ID] = true
		}
	}
	slices.SortStableFunc(d.bindings, func(a, b bindingRecord) int { return cmp.Compare(a.Seq, b.Seq) })
	for _, br := range d.bindings {
		r.bindingSeq.Store(max(r.bindingSeq.Load(), br.Seq))
		if !r.applyBindingRecord(br) {
			r.logger.Warn("mq: dropping binding whose source or destination is gone",
				"vhost", br.VHost, "source", br.Source, "destination", br.Destination)
			if err := r.defs.Delete(bindingKey(br.VHost, br)); err != nil {
				return fmt.Errorf("mq: delete dangling binding: %w", err)
			}
		}
	}
	if r.follower == nil {
		// A cluster node's definitions may lag the cluster's at start:
		// it sets strays aside once it caught up (cluster.go).
		r.stores.SetAsideStrays(live)
	}
	return nil
}

// queueFromRecord builds a stored queue: a stream queue on its topic (nil
// when stream queues are not available), the placeholder of a queue that
// lives on another node, or this node's queue on its store (local), whose
// unsettled messages it recovers. It is also nil for a late-followed
// record of this node's own exclusive queue, deleted since
// (exclusiveFromRecord).
func (v *VHost) queueFromRecord(qr queueRecord) (q *queue, local bool, err error) {
	args, err := decodeArgs(qr.Args)
	if err != nil {
		return nil, false, fmt.Errorf("mq: queue %q arguments: %w", qr.Name, err)
	}
	def := QueueDef{Name: qr.Name, Durable: !qr.Exclusive, Exclusive: qr.Exclusive, AutoDelete: qr.AutoDelete, Args: args}
	switch {
	case qr.Exclusive:
		return v.exclusiveFromRecord(def, qr), false, nil
	case queueTypeOf(args) == streamQueue:
		q, err := v.loadStreamQueue(def, qr.Stream)
		if err != nil {
			return nil, false, fmt.Errorf("mq: open queue %q in vhost %q: %w", qr.Name, qr.VHost, err)
		}
		return q, false, nil
	case qr.Members != nil:
		q, member := v.quorumQueue(def, qr)
		return q, member, nil
	case qr.Node != 0 && qr.Node != v.r.nodeID():
		return v.classicPlaceholder(def, qr.ID, qr.Node), false, nil
	}
	return v.openQueue(def, qr.ID), true, nil
}

func (r *Registry) applyBindingRecord(br bindingRecord) bool {
	v := r.vhosts[br.VHost]
	return v != nil && v.applyBindingRecordLocked(br)
}

// applyBindingRecordLocked adds a stored binding, if both its ends exist.
// Caller holds mu for writing (or is loading).
func (v *VHost) applyBindingRecordLocked(br bindingRecord) bool {
	src := v.exchanges[br.Source]
	if src == nil || src.def.Name == "" {
		return false
	}
	args, err := decodeArgs(br.Args)
	if err != nil {
		return false
	}
	var d dest
	switch br.DestKind {
	case destQueue:
		d.q = v.queues[br.Destination]
	case destExchange:
		d.x = v.exchanges[br.Destination]
	}
	if d.q == nil && d.x == nil {
		return false
	}
	_, err = v.addBindingLocked(src, d, br.Key, args)
	return err == nil
}
