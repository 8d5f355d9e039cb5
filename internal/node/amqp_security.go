package node

import (
	"errors"
	"fmt"
	"net"

	"github.com/wharf-mq/wharf/internal/access"
	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/httpapi"
	"github.com/wharf-mq/wharf/internal/mq"
	"github.com/wharf-mq/wharf/internal/tlsconf"
	"github.com/wharf-mq/wharf/internal/users"
)

// openAccess opens the AMQP and management permissions beside the users,
// in the metadata log's definition store, and gives the bootstrap users
// (guest, --admin-user) every permission in the default vhost, once: as
// RabbitMQ gives its default user on a new node.
func openAccess(cfg SecurityConfig, b *broker.Broker, userStore *users.Store) (*access.Store, error) {
	store, err := access.Open(b.Definitions())
	if err != nil {
		return nil, fmt.Errorf("node: open the permissions: %w", err)
	}
	for _, name := range []string{"guest", cfg.AdminUser} {
		if _, ok := userStore.Get(name); !ok {
			continue
		}
		if err := store.GrantOnce(name, mq.DefaultVHost); err != nil {
			return nil, fmt.Errorf("node: grant %s its first permissions: %w", name, err)
		}
	}
	return store, nil
}

// Access is the node's AMQP and management permissions.
func (n *Node) Access() *access.Store { return n.access }

// tlsListeners are the AMQPS and HTTPS listeners (RabbitMQ's 5671 and
// 15671), bound only when the node has a certificate; nil where not
// asked for.
type tlsListeners struct {
	amqps, https net.Listener
}

// listenTLS binds the TLS listeners cfg asks for. Without a certificate
// asking for one is an error: RabbitMQ binds no TLS listener without
// certificates, and a listener that silently does not exist helps nobody.
func listenTLS(cfg Config, certs *tlsconf.Reloader) (tlsListeners, error) {
	var l tlsListeners
	if (cfg.AMQPSAddr != "" || cfg.HTTPSAddr != "") && certs == nil {
		return l, errors.New("node: AMQPS and HTTPS need a certificate (--tls-cert, --tls-key)")
	}
	for _, want := range []struct {
		name, addr string
		into       *net.Listener
	}{{"AMQPS", cfg.AMQPSAddr, &l.amqps}, {"HTTPS", cfg.HTTPSAddr, &l.https}} {
		if want.addr == "" {
			continue
		}
		ln, err := net.Listen("tcp", want.addr)
		if err != nil {
			l.close()
			return tlsListeners{}, fmt.Errorf("node: listen for %s on %q: %w", want.name, want.addr, err)
		}
		*want.into = ln
	}
	return l, nil
}

func (l tlsListeners) close() {
	for _, ln := range []net.Listener{l.amqps, l.https} {
		if ln != nil {
			ln.Close()
		}
	}
}

// servingTLS caps a TLS listener's connections as the others' and
// wraps it in the node's certificate; each handshake takes the
// certificate current then, so SIGHUP's reload reaches new connections
// and leaves established ones alone.
func (n *Node) servingTLS(name string, ln net.Listener) net.Listener {
	return tlsconf.NewListener(n.limited(name, ln), n.certs.ServerConfig())
}

// AMQPSAddr is the address the AMQPS listener is bound to, or "" when
// the node has none.
func (n *Node) AMQPSAddr() string { return addrOf(n.tlsListeners.amqps) }

// HTTPSAddr is the address the HTTPS management listener is bound to, or
// "" when the node has none.
func (n *Node) HTTPSAddr() string { return addrOf(n.tlsListeners.https) }

func addrOf(ln net.Listener) string {
	if ln == nil {
		return ""
	}
	return ln.Addr().String()
}

// apiListeners are the node's listeners as /api/overview lists them,
// with RabbitMQ's protocol names.
func (n *Node) apiListeners() []httpapi.Listener {
	type named struct {
		protocol string
		ln       net.Listener
	}
	var all []named
	for _, k := range n.kafkaListeners {
		all = append(all, named{"kafka", k.ln})
	}
	all = append(all, named{"amqp", n.amqpListener}, named{"amqp/ssl", n.tlsListeners.amqps},
		named{"http", n.httpListener}, named{"https", n.tlsListeners.https}, named{"nats", n.natsListener})
	var out []httpapi.Listener
	for _, l := range all {
		if l.ln != nil {
			out = append(out, httpapi.Listener{Protocol: l.protocol, Addr: l.ln.Addr()})
		}
	}
	return out
}
