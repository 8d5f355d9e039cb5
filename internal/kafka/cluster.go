package kafka

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// metadataBrokers lists the brokers clients of listener l should know:
// this node alone, or in a cluster every registered broker this node is
// in contact with (this node as l advertises it, registered or not yet).
// As Kafka leaves a fenced broker out of Metadata, a node that is down
// is left out: clients then stop sending to it what they pinned to it
// (franz-go re-resolves a coordinator whose broker left the list).
func (s *Server) metadataBrokers(l *Listener) []kmsg.MetadataResponseBroker {
	self := s.metadataBroker(l)
	out := []kmsg.MetadataResponseBroker{self}
	for _, info := range s.broker.Brokers() {
		if info.NodeID == self.NodeID || !s.broker.NodeUp(info.NodeID) {
			continue
		}
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = info.NodeID, info.Host, info.Port
		out = append(out, b)
	}
	slices.SortFunc(out, func(x, y kmsg.MetadataResponseBroker) int { return int(x.NodeID - y.NodeID) })
	return out
}
