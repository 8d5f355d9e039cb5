package kafka

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// metadataBrokers lists the brokers clients of listener l should know:
// this node alone, or in a cluster every registered broker not known to
// be down (this node as l advertises it, registered or not yet).
// As Kafka leaves a fenced broker out of Metadata, a node that is down
// is left out: clients then stop sending to it what they pinned to it
// (franz-go re-resolves a coordinator whose broker left the list). Only
// a node in contact with the controller leaves any out: one cut off with
// a minority cannot tell the majority's nodes from dead ones, and
// clients that forget the brokers a Metadata answer leaves out (sarama)
// would be left asking the minority alone for leaders it cannot know.
func (s *Server) metadataBrokers(l *Listener) []kmsg.MetadataResponseBroker {
	self := s.metadataBroker(l)
	out := []kmsg.MetadataResponseBroker{self}
	fencing := s.broker.InContactWithController()
	for _, info := range s.broker.Brokers() {
		if info.NodeID == self.NodeID || fencing && !s.broker.NodeUp(info.NodeID) {
			continue
		}
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = info.NodeID, info.Host, info.Port
		out = append(out, b)
	}
	slices.SortFunc(out, func(x, y kmsg.MetadataResponseBroker) int { return int(x.NodeID - y.NodeID) })
	return out
}
