// Package kafkaview is the Kafka side of the management API, what the
// console shows of Kafka: topics with their partitions, sizes and
// configs; the records of a partition read from an offset or a time,
// filtered by key or header and rendered for people; a record produced;
// consumer groups with their members and lag; offset resets with the
// rules of `wharf groups reset-offsets` (internal/offsetreset). It reads
// the broker core and the group coordinator directly, with no Kafka round
// trip; internal/httpapi's /api/kafka/ endpoints translate HTTP to it.
// Its result types carry the JSON names the API answers with.
package kafkaview

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/group"
)

// The kinds of error the view returns, wrapped with the details, for the
// API to answer with 404, 400 and 409.
var (
	ErrNotFound = errors.New("not found")       // no such topic, partition or group
	ErrInvalid  = errors.New("invalid request") // a request the broker refuses as it stands
	ErrConflict = errors.New("conflict")        // the group's state forbids it (live members)
)

// View answers for one broker and its group coordinator. Safe for
// concurrent use.
type View struct {
	broker *broker.Broker
	// groupsOf returns the node's group coordinator, nil until it is
	// open: a cluster node opens its own once the cluster has a quorum.
	groupsOf func() *group.Coordinator
	now      func() time.Time
	// unkeyed spreads records produced without a key and partition
	// round-robin over a topic's partitions.
	unkeyed atomic.Uint32
}

// New returns a View of b and of the group coordinator groupsOf returns
// at each call (nil while the node has none open).
func New(b *broker.Broker, groupsOf func() *group.Coordinator) *View {
	return &View{broker: b, groupsOf: groupsOf, now: time.Now}
}

// groups returns the node's group coordinator, or ErrNotFound while it is
// not open: no group is known here yet.
func (v *View) groups() (*group.Coordinator, error) {
	if g := v.groupsOf(); g != nil {
		return g, nil
	}
	return nil, fmt.Errorf("%w: this node's group coordinator is not open yet", ErrNotFound)
}

// CatchUp waits until this node applied every topic the cluster
// committed to its metadata log before the call, and reports whether it
// did: a lookup that missed may then look again. It is the metadata
// log's barrier (the definition store's: definitions and topics share
// the log), which returns once this node's apply loop applied a record
// written after the call, and the loop creates a topic as it applies its
// record, before it goes on. It gives up when ctx ends (a node cut off
// from the metadata quorum would wait for the metadata write timeout).
// On a single node it reports false: its topics are all here.
func (v *View) CatchUp(ctx context.Context) bool {
	return v.broker.Clustered() && v.broker.Definitions().BarrierContext(ctx) == nil
}

// topic looks a topic up, as ErrNotFound when it does not exist.
func (v *View) topic(name string) (*broker.Topic, error) {
	t, err := v.broker.Topic(name)
	if errors.Is(err, broker.ErrUnknownTopic) {
		return nil, fmt.Errorf("%w: no topic %q", ErrNotFound, name)
	}
	return t, err
}

// partition looks a partition up, as ErrNotFound when it does not exist.
func (v *View) partition(topic string, index int32) (*broker.Partition, error) {
	t, err := v.topic(topic)
	if err != nil {
		return nil, err
	}
	p, err := t.Partition(index)
	if err != nil {
		return nil, fmt.Errorf("%w: topic %q has no partition %d", ErrNotFound, topic, index)
	}
	return p, nil
}
