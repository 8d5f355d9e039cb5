package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// kafkaFlags are how a Kafka client command reaches the broker:
// --bootstrap-server and the security flags of a SASL or TLS listener.
type kafkaFlags struct {
	bootstrap *string
	user      *string
	password  *string
	mechanism *string
	useTLS    *bool
	tlsCA     *string
	tlsCert   *string
	tlsKey    *string
}

// saslMechanisms are what --sasl-mechanism takes, as Kafka names them.
var saslMechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}

// addBootstrapFlag adds --bootstrap-server (env WHARF_BOOTSTRAP_SERVER) and
// the security flags to a Kafka client subcommand, and returns them and
// their env bindings.
func addBootstrapFlag(fs *flag.FlagSet) (*kafkaFlags, []string) {
	f := &kafkaFlags{
		bootstrap: fs.String("bootstrap-server", "localhost"+defaultKafkaAddr, "comma-separated Kafka addresses of the broker"),
		user:      fs.String("user", "", "log in as this user with SASL (a SASL_PLAINTEXT or SASL_SSL listener)"),
		password:  fs.String("password", "", "the password of --user"),
		mechanism: fs.String("sasl-mechanism", "SCRAM-SHA-512", "SASL mechanism of --user: "+strings.Join(saslMechanisms, ", ")),
		useTLS:    fs.Bool("tls", false, "connect with TLS (an SSL or SASL_SSL listener), trusting the system's CAs"),
		tlsCA:     fs.String("tls-ca", "", "connect with TLS, trusting the CA certificates in this PEM file"),
		tlsCert:   fs.String("tls-cert", "", "with TLS, present this PEM client certificate (for a broker with --tls-client-ca)"),
		tlsKey:    fs.String("tls-key", "", "the PEM private key of --tls-cert"),
	}
	return f, bindEnv(fs, "bootstrap-server", "user", "password", "sasl-mechanism", "tls", "tls-ca", "tls-cert", "tls-key")
}

// kafkaSeeds is where and how a command connects: the seed brokers, the
// TLS configuration (nil: plaintext) and the SASL mechanism (nil: none).
type kafkaSeeds struct {
	addrs []string
	tls   *tls.Config
	sasl  sasl.Mechanism
}

// seedAddrs checks the flags and turns them into kafkaSeeds; a seed
// without a port gets Kafka's, as franz-go gives it.
func seedAddrs(f kafkaFlags) (kafkaSeeds, error) {
	var seeds kafkaSeeds
	addrs, err := splitSeeds(*f.bootstrap)
	if err != nil {
		return seeds, err
	}
	seeds.addrs = addrs
	if seeds.tls, err = f.tlsConfig(); err != nil {
		return seeds, err
	}
	seeds.sasl, err = f.saslMechanism()
	return seeds, err
}

// options are the franz-go options that connect as the seeds say.
func (s kafkaSeeds) options() []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(s.addrs...)}
	if s.tls != nil {
		opts = append(opts, kgo.DialTLSConfig(s.tls))
	}
	if s.sasl != nil {
		opts = append(opts, kgo.SASL(s.sasl))
	}
	return opts
}

func (f kafkaFlags) tlsConfig() (*tls.Config, error) {
	if !*f.useTLS && *f.tlsCA == "" && *f.tlsCert == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if *f.tlsCA != "" {
		pem, err := os.ReadFile(*f.tlsCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca: %s holds no PEM certificate", *f.tlsCA)
		}
	}
	switch {
	case (*f.tlsCert == "") != (*f.tlsKey == ""):
		return nil, usagef("--tls-cert and --tls-key go together")
	case *f.tlsCert != "":
		cert, err := tls.LoadX509KeyPair(*f.tlsCert, *f.tlsKey)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

func (f kafkaFlags) saslMechanism() (sasl.Mechanism, error) {
	if *f.user == "" {
		if *f.password != "" {
			return nil, usagef("--password needs --user")
		}
		return nil, nil
	}
	switch *f.mechanism {
	case "PLAIN":
		return plain.Auth{User: *f.user, Pass: *f.password}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: *f.user, Pass: *f.password}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: *f.user, Pass: *f.password}.AsSha512Mechanism(), nil
	}
	return nil, usagef("--sasl-mechanism %q: want one of %s", *f.mechanism, strings.Join(saslMechanisms, ", "))
}

// checkKafkaSeeds returns nil if a seed answers as a Kafka broker, else
// the first seed's problem.
func checkKafkaSeeds(ctx context.Context, seeds kafkaSeeds) error {
	var firstErr error
	for _, seed := range seeds.addrs {
		err := checkPeerWith(ctx, seed, kafkaService, seeds.tls)
		if err == nil {
			return nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

// deniedError reports an error no retry can cure: the broker's ACLs or
// the credentials refuse the client.
func deniedError(err error) bool {
	for _, denied := range []error{kerr.TopicAuthorizationFailed, kerr.GroupAuthorizationFailed,
		kerr.TransactionalIDAuthorizationFailed, kerr.ClusterAuthorizationFailed, kerr.SaslAuthenticationFailed} {
		if errors.Is(err, denied) {
			return true
		}
	}
	return false
}
