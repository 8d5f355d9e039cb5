package main

import (
	"flag"
	"time"

	"github.com/wharf-mq/wharf/internal/acl"
	"github.com/wharf-mq/wharf/internal/node"
)

// kafkaSecurityFlags are wharf serve's Kafka listener and security flags.
type kafkaSecurityFlags struct {
	listeners           *string
	sessionLifetime     *time.Duration
	authorizer          *bool
	superUsers          *string
	allowEveryoneNoACLs *bool
}

func kafkaSecurityServeFlags(fs *flag.FlagSet) kafkaSecurityFlags {
	return kafkaSecurityFlags{
		listeners: fs.String("kafka-listeners", "",
			"Kafka listeners in Kafka's syntax, instead of --kafka-addr: PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://:9093,SSL://:9094,SASL_SSL://:9095 (SSL and SASL_SSL use --tls-cert)"),
		sessionLifetime: fs.Duration("kafka-sasl-session-lifetime", 0,
			"how long a Kafka SASL login lasts before the client must re-authenticate (connections.max.reauth.ms); 0: forever"),
		authorizer: fs.Bool("kafka-authorizer", false,
			"check every Kafka request against the ACLs (wharf acls); what no ACL allows is denied, and unauthenticated clients are User:ANONYMOUS"),
		superUsers: fs.String("super-users", "",
			"Kafka principals that may do everything, Kafka's super.users syntax: 'User:alice;User:bob'"),
		allowEveryoneNoACLs: fs.Bool("kafka-allow-everyone-if-no-acl", false,
			"with --kafka-authorizer, let everyone use a resource no ACL names (Kafka's allow.everyone.if.no.acl.found)"),
	}
}

// kafkaSecurityEnv names the flags bindEnv maps to WHARF_ variables.
var kafkaSecurityEnv = []string{"kafka-listeners", "kafka-sasl-session-lifetime", "kafka-authorizer", "super-users",
	"kafka-allow-everyone-if-no-acl"}

// apply checks the flags and sets them in cfg.
func (f kafkaSecurityFlags) apply(fs *flag.FlagSet, cfg *node.Config) error {
	if *f.sessionLifetime < 0 {
		return usagef("--kafka-sasl-session-lifetime must not be negative, got %v", *f.sessionLifetime)
	}
	cfg.KafkaSecurity.SASLSessionLifetime = *f.sessionLifetime
	superUsers, err := acl.ParseSuperUsers(*f.superUsers)
	if err != nil {
		return usagef("--super-users: %v", err)
	}
	if (len(superUsers) > 0 || *f.allowEveryoneNoACLs) && !*f.authorizer {
		return usagef("--super-users and --kafka-allow-everyone-if-no-acl need --kafka-authorizer")
	}
	cfg.KafkaSecurity.Authorizer = *f.authorizer
	cfg.KafkaSecurity.SuperUsers = superUsers
	cfg.KafkaSecurity.AllowEveryoneIfNoACL = *f.allowEveryoneNoACLs
	if *f.listeners == "" {
		return nil
	}
	if flagGiven(fs, "kafka-addr") {
		return usagef("--kafka-listeners replaces --kafka-addr: give one of them")
	}
	listeners, err := node.ParseKafkaListeners(*f.listeners)
	if err != nil {
		return usagef("--kafka-listeners: %v", err)
	}
	cfg.KafkaListeners = listeners
	return nil
}

// flagGiven reports whether a flag was set, on the command line or by its
// environment variable.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}
