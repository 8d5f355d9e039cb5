package node

import (
	"fmt"
	"time"

	"github.com/wharf-mq/wharf/internal/acl"
	"github.com/wharf-mq/wharf/internal/broker"
	"github.com/wharf-mq/wharf/internal/kafka"
	"github.com/wharf-mq/wharf/internal/quota"
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

// kafkaAccess is what decides what Kafka clients may do: the ACLs'
// authorizer (nil when off) and the client quotas.
type kafkaAccess struct {
	authorizer *acl.Authorizer
	quotas     *quota.Manager
}

// openKafkaAccess opens the client quotas and, when the authorizer is on,
// the ACLs, both kept in the metadata log's definition store.
func openKafkaAccess(cfg KafkaSecurityConfig, b *broker.Broker) (kafkaAccess, error) {
	var access kafkaAccess
	quotas, err := quota.Open(b.Definitions())
	if err != nil {
		return access, fmt.Errorf("node: open the Kafka client quotas: %w", err)
	}
	access.quotas = quotas
	if !cfg.Authorizer {
		return access, nil
	}
	store, err := acl.Open(b.Definitions())
	if err != nil {
		return access, fmt.Errorf("node: open the Kafka ACLs: %w", err)
	}
	access.authorizer = acl.NewAuthorizer(store, cfg.SuperUsers, cfg.AllowEveryoneIfNoACL)
	return access, nil
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
		Groups:                    n.groups.Load(),
		Transactions:              n.txns,
		Users:                     n.users,
		SASLSessionLifetime:       cfg.KafkaSecurity.SASLSessionLifetime,
		LoginLimiter:              n.logins,
		Authorizer:                n.kafkaAccess.authorizer,
		Quotas:                    n.kafkaAccess.quotas,
	}
}
