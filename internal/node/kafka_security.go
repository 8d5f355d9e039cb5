package node

import (
	"time"

	"github.com/wharf-mq/wharf/internal/kafka"
)

// KafkaSecurityConfig is what the Kafka listeners' authentication and
// authorization need besides the user store.
type KafkaSecurityConfig struct {
	// SASLSessionLifetime is how long a SASL login lasts before the
	// client must re-authenticate (connections.max.reauth.ms); 0:
	// forever.
	SASLSessionLifetime time.Duration
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
	}
}
