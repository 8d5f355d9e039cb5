package amqp

import (
	"crypto/tls"
	"strings"

	"github.com/wharf-mq/wharf/internal/mq"
)

// What the management API shows of this node's clients, and what this
// node tells the others of them in a cluster (Server satisfies
// mq.Clients): the front end's snapshots (info.go) in mq's types, which a
// node call carries.

// ConsumerDetails returns the consumers of the connections' channels,
// each with its channel and connection, in no order.
func (s *Server) ConsumerDetails() []mq.ConsumerDetail {
	var out []mq.ConsumerDetail
	for _, c := range s.Connections() {
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

// ConnectionDetails returns the connections past their handshake, with
// their channels, in no order.
func (s *Server) ConnectionDetails() []mq.ConnectionDetail {
	conns := s.Connections()
	out := make([]mq.ConnectionDetail, len(conns))
	for i, c := range conns {
		out[i] = mq.ConnectionDetail{
			Name: c.Name, User: c.User, VHost: c.VHost, PeerHost: c.PeerHost, PeerPort: c.PeerPort, Host: c.Host,
			Port: c.Port, AuthMechanism: c.AuthMechanism, ConnectedAt: c.ConnectedAt, ClientProperties: c.ClientProperties,
			ChannelMax: c.ChannelMax, FrameMax: c.FrameMax, Heartbeat: c.Heartbeat, Blocked: c.Blocked,
			Traffic: c.Traffic, TLS: tlsDetail(c.TLS), Channels: make([]mq.ChannelDetail, len(c.Channels)),
		}
		for j, ch := range c.Channels {
			out[i].Channels[j] = mq.ChannelDetail{
				Number: ch.Number, Prefetch: ch.Prefetch, GlobalPrefetch: ch.GlobalPrefetch, Confirm: ch.Confirm,
				Transactional: ch.Transactional, Unacknowledged: ch.Unacknowledged, Unconfirmed: ch.Unconfirmed,
				Consumers: len(ch.Consumers), MessageStats: ch.MessageStats,
			}
		}
	}
	return out
}

// tlsDetail is what the management API shows of a TLS connection's
// state; nil for plain TCP.
func tlsDetail(st *tls.ConnectionState) *mq.TLSDetail {
	if st == nil {
		return nil
	}
	d := &mq.TLSDetail{
		// RabbitMQ names the protocol as Erlang's ssl does: tlsv1.3.
		Protocol: strings.ToLower(strings.ReplaceAll(tls.VersionName(st.Version), " ", "v")),
		Cipher:   tls.CipherSuiteName(st.CipherSuite),
	}
	if len(st.PeerCertificates) > 0 {
		c := st.PeerCertificates[0]
		d.PeerCertSubject, d.PeerCertIssuer = c.Subject.String(), c.Issuer.String()
		d.PeerCertValidity = c.NotBefore.UTC().Format("2006-01-02T15:04:05Z") + " - " + c.NotAfter.UTC().Format("2006-01-02T15:04:05Z")
	}
	return d
}
