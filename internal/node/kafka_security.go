package node

import (
	"fmt"
	"time"

	"github.com/wharf-mq/wharf/internal/acl"
	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/kafka"
)

// KafkaSecurityConfig is what the Kafka listeners' authentication and
// authorization need besides the user store.
type KafkaSecurityConfig struct {
	// SASLSessionLifetime is how long a SASL login lasts before the
	// client must re-authenticate (connections.max.reauth.ms); 0:
	// forever.
	SASLSessionLifetime time.Duration
	// Authorizer turns on Kafka ACLs (--kafka-authorizer): every request
	// is checked and what no ACL allows is denied; the ACL APIs work.
	Authorizer bool
	// SuperUsers may do everything ("User:alice"; --super-users).
	SuperUsers []string
	// AllowEveryoneIfNoACL is Kafka's allow.everyone.if.no.acl.found:
	// a resource no ACL names is open to everyone.
	AllowEveryoneIfNoACL bool
}

// openKafkaAuthorizer opens the ACLs in the metadata log's definition
// store when the authorizer is on.
func openKafkaAuthorizer(cfg KafkaSecurityConfig, b *broker.Broker) (*acl.Authorizer, error) {
	if !cfg.Authorizer {
		return nil, nil
	}
	store, err := acl.Open(b.Definitions())
	if err != nil {
		return nil, fmt.Errorf("node: open the Kafka ACLs: %w", err)
	}
	return acl.NewAuthorizer(store, cfg.SuperUsers, cfg.AllowEveryoneIfNoACL), nil
}

// kafkaConfig is the Kafka server's configuration.
func (n *Node) kafkaConfig() kafka.Config {
	cfg := n.cfg
	return kafka.Config{
		MaxRequestBytes:           cfg.MaxRequestBytes,
		MaxNonProduceRequestBytes: cfg.KafkaMaxNonProduceRequestBytes,
		QueuedMaxRequestBytes:     cfg.KafkaQueuedMaxRequestBytes,
		ConnectionsMaxIdle:        cfg.KafkaConnectionsMaxIdle,
		Logger:                    n.logger, // the server tags its lines component=kafka
		Groups:                    n.groups,
		Transactions:              n.txns,
		Users:                     n.users,
		SASLSessionLifetime:       cfg.KafkaSecurity.SASLSessionLifetime,
		LoginLimiter:              n.logins,
		Authorizer:                n.authorizer,
	}
}
