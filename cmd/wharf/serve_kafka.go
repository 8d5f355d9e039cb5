package main

import (
	"flag"

	"github.com/wharf-mq/wharf/internal/node"
)

// kafkaSecurityFlags are wharf serve's Kafka listener and security flags.
type kafkaSecurityFlags struct {
	listeners *string
}

func kafkaSecurityServeFlags(fs *flag.FlagSet) kafkaSecurityFlags {
	return kafkaSecurityFlags{
		listeners: fs.String("kafka-listeners", "",
			"Kafka listeners in Kafka's syntax, instead of --kafka-addr: PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://:9093,SSL://:9094,SASL_SSL://:9095 (SSL and SASL_SSL use --tls-cert)"),
	}
}

// kafkaSecurityEnv names the flags bindEnv maps to WHARF_ variables.
var kafkaSecurityEnv = []string{"kafka-listeners"}

// apply checks the flags and sets them in cfg.
func (f kafkaSecurityFlags) apply(fs *flag.FlagSet, cfg *node.Config) error {
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
