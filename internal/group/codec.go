package group

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The records of __consumer_offsets use Kafka's own encoding. Every key
// starts with an int16 version that says what the record is:
//
//	key version 0, 1  OffsetCommitKey (group, topic, partition)
//	                  value: OffsetCommitValue v3 (offset, leader epoch,
//	                  metadata, commit timestamp)
//	key version 2     GroupMetadataKey (group): a classic group
//	                  value: GroupMetadataValue v3 (protocol type,
//	                  generation, protocol, leader, state timestamp, and
//	                  every member with its subscription and assignment)
//	key version 3     ConsumerGroupMetadataKey (group): a KIP-848 group
//	                  value: ConsumerGroupMetadataValue v0 (group epoch)
//
// A null value is a tombstone: the offset or the group is gone. Kafka's
// further KIP-848 records (member metadata, target and current
// assignments, key versions 4-8) are not written: consumer group members
// are not restored after a restart, they rejoin (they get
// UNKNOWN_MEMBER_ID), while their committed offsets are kept. Unknown key
// versions are skipped when the topic is read.
const (
	keyOffsetCommit        = 1
	keyGroupMetadata       = 2
	keyConsumerGroupMeta   = 3
	valueOffsetCommit      = 3
	valueGroupMetadata     = 3
	valueConsumerGroupMeta = 0
)

// offsetKey encodes the key of a committed offset.
func offsetKey(group, topic string, partition int32) []byte {
	k := kmsg.OffsetCommitKey{Version: keyOffsetCommit, Group: group, Topic: topic, Partition: partition}
	return k.AppendTo(nil)
}

// offsetValue encodes a committed offset.
func offsetValue(o committedOffset) []byte {
	v := kmsg.OffsetCommitValue{
		Version:         valueOffsetCommit,
		Offset:          o.offset,
		LeaderEpoch:     o.leaderEpoch,
		Metadata:        o.metadata,
		CommitTimestamp: o.committedAt.UnixMilli(),
	}
	return v.AppendTo(nil)
}

// classicGroupKey encodes the key of a classic group's metadata.
func classicGroupKey(group string) []byte {
	k := kmsg.GroupMetadataKey{Version: keyGroupMetadata, Group: group}
	return k.AppendTo(nil)
}

// consumerGroupKey encodes the key of a KIP-848 group's metadata. Kafka's
// ConsumerGroupMetadataKey has GroupMetadataKey's layout under version 3.
func consumerGroupKey(group string) []byte {
	k := kmsg.GroupMetadataKey{Version: keyConsumerGroupMeta, Group: group}
	return k.AppendTo(nil)
}

// consumerGroupValue encodes Kafka's ConsumerGroupMetadataValue v0: the
// version, the group epoch and an empty tagged-field section (the value is
// a flexible version). kmsg has no type for it.
func consumerGroupValue(epoch int32) []byte {
	dst := kbin.AppendInt16(nil, valueConsumerGroupMeta)
	dst = kbin.AppendInt32(dst, epoch)
	return kbin.AppendUvarint(dst, 0)
}

// decodedRecord is one record of __consumer_offsets, understood.
type decodedRecord struct {
	kind      int16 // keyOffsetCommit, keyGroupMetadata, keyConsumerGroupMeta
	group     string
	topic     string // offset commits
	partition int32  // offset commits
	tombstone bool

	offset  kmsg.OffsetCommitValue
	classic kmsg.GroupMetadataValue
	epoch   int32 // consumer groups
	unknown bool  // a key version this package does not read
}

// decodeRecord parses one record. Keys of unknown versions come back with
// unknown set, not as errors: newer Kafka versions write record types this
// package has no use for.
func decodeRecord(key, value []byte) (decodedRecord, error) {
	if len(key) < 2 {
		return decodedRecord{}, fmt.Errorf("key of %d bytes", len(key))
	}
	d := decodedRecord{kind: int16(binary.BigEndian.Uint16(key)), tombstone: value == nil}
	switch d.kind {
	case 0, keyOffsetCommit:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(key); err != nil {
			return d, fmt.Errorf("offset commit key: %w", err)
		}
		d.kind, d.group, d.topic, d.partition = keyOffsetCommit, k.Group, k.Topic, k.Partition
		if value != nil {
			if err := d.offset.ReadFrom(value); err != nil {
				return d, fmt.Errorf("offset commit value of %s %s[%d]: %w", k.Group, k.Topic, k.Partition, err)
			}
			if d.offset.Version < 3 {
				d.offset.LeaderEpoch = -1
			}
		}
	case keyGroupMetadata, keyConsumerGroupMeta:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(key); err != nil {
			return d, fmt.Errorf("group metadata key: %w", err)
		}
		d.group = k.Group
		if value == nil {
			break
		}
		if d.kind == keyGroupMetadata {
			if err := d.classic.ReadFrom(value); err != nil {
				return d, fmt.Errorf("group metadata value of %s: %w", k.Group, err)
			}
			break
		}
		r := kbin.Reader{Src: value}
		r.Int16() // value version: v0 is the only one, later ones only add tags
		d.epoch = r.Int32()
		if !r.Ok() {
			return d, fmt.Errorf("consumer group metadata value of %s: truncated", k.Group)
		}
	default:
		d.unknown = true
	}
	return d, nil
}

// classicGroupValue encodes a classic group's metadata.
func classicGroupValue(g *group) []byte {
	cg := &g.classic
	v := kmsg.GroupMetadataValue{
		Version:               valueGroupMetadata,
		ProtocolType:          cg.protocolType,
		Generation:            cg.generation,
		CurrentStateTimestamp: cg.stateSince.UnixMilli(),
	}
	if cg.protocol != "" {
		v.Protocol = kmsg.StringPtr(cg.protocol)
	}
	if cg.leader != "" {
		v.Leader = kmsg.StringPtr(cg.leader)
	}
	for _, m := range cg.membersInJoinOrder() {
		mv := kmsg.NewGroupMetadataValueMember()
		mv.MemberID = m.id
		mv.InstanceID = m.instanceID
		mv.ClientID = m.clientID
		mv.ClientHost = m.clientHost
		mv.RebalanceTimeoutMillis = int32(m.rebalanceTimeout.Milliseconds())
		mv.SessionTimeoutMillis = int32(m.sessionTimeout.Milliseconds())
		mv.Subscription = m.metadataFor(cg.protocol)
		mv.Assignment = m.assignment
		v.Members = append(v.Members, mv)
	}
	return v.AppendTo(nil)
}
