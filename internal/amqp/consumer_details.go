package amqp

import "github.com/wharf-mq/wharf/internal/mq"

// ConsumerDetails returns the consumers of conns' channels, each with its
// channel and connection, in no order: what the management API lists of
// this node's consumers, and what this node tells the others of them in a
// cluster (mq.Registry.ListConsumersWith).
func ConsumerDetails(conns []ConnectionInfo) []mq.ConsumerDetail {
	var out []mq.ConsumerDetail
	for _, c := range conns {
		for _, ch := range c.Channels {
			for _, k := range ch.Consumers {
				out = append(out, mq.ConsumerDetail{
					VHost: c.VHost, Queue: k.Queue, Tag: k.Tag, AckRequired: k.AckRequired, Exclusive: k.Exclusive,
					Prefetch: k.Prefetch, Args: k.Args,
					Channel: mq.ConsumerChannel{Number: ch.Number, Connection: c.Name, User: c.User,
						PeerHost: c.PeerHost, PeerPort: c.PeerPort},
				})
			}
		}
	}
	return out
}
