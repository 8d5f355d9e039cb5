package node

import (
	"fmt"

	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/tlsconf"
	"github.com/wharf-mq/wharf/internal/users"
)

// SecurityConfig is what every listener's authentication shares.
type SecurityConfig struct {
	// AdminUser and AdminPassword name an administrator to create if it
	// does not exist yet (`--admin-user`, `--admin-password`); see
	// users.Bootstrap. A new node also gets guest/guest, loopback only.
	AdminUser     string
	AdminPassword string
	// TLS names the server certificate of every TLS listener; empty
	// Cert: no TLS.
	TLS tlsconf.Files
}

// openSecurity opens the user store in the metadata log's definition store
// (so users live and replicate with the rest of the metadata: in a cluster
// every node's store follows the log) and loads the TLS certificate when
// one is configured.
func openSecurity(cfg SecurityConfig, b *broker.Broker) (*users.Store, *tlsconf.Reloader, error) {
	store, err := users.Open(b.Definitions())
	if err != nil {
		return nil, nil, fmt.Errorf("node: open the user store: %w", err)
	}
	if err := users.Bootstrap(store, cfg.AdminUser, cfg.AdminPassword); err != nil {
		return nil, nil, fmt.Errorf("node: %w", err)
	}
	if cfg.TLS.Cert == "" && cfg.TLS.Key == "" && cfg.TLS.ClientCA == "" {
		return store, nil, nil
	}
	certs, err := tlsconf.Load(cfg.TLS)
	if err != nil {
		return nil, nil, fmt.Errorf("node: %w", err)
	}
	return store, certs, nil
}

// Users is the node's user store, shared by every protocol.
func (n *Node) Users() *users.Store { return n.users }

// ReloadTLS reads the certificate files again (`wharf serve` calls it on
// SIGHUP); new TLS handshakes use them, established connections keep
// theirs. Without TLS it does nothing.
func (n *Node) ReloadTLS() error {
	if n.certs == nil {
		return nil
	}
	return n.certs.Reload()
}
