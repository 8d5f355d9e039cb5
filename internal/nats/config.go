package nats

import (
	"errors"
	"log/slog"
	"time"
)

// Defaults, nats-server 2.x's.
const (
	DefaultMaxPayload     = 1 << 20          // max_payload
	DefaultMaxPending     = 64 << 20         // max_pending
	DefaultMaxControlLine = 4096             // max_control_line
	DefaultWriteDeadline  = 10 * time.Second // write_deadline
	DefaultPingInterval   = 2 * time.Minute  // ping_interval
	DefaultMaxPingsOut    = 2                // ping_max
	DefaultAuthTimeout    = 2 * time.Second  // authorization { timeout }
)

// Config tunes the NATS front end. The zero value of a field means its
// default.
type Config struct {
	// Users maps user names to passwords (CONNECT's "user" and "pass").
	// Token is the one token accepted as CONNECT's "auth_token". With
	// neither, any client may connect; nats-server refuses both at once
	// and so does NewServer.
	Users map[string]string
	Token string

	// MaxPayload is the largest message (headers and payload) a client
	// may publish, announced in INFO; a larger PUB gets "-ERR 'Maximum
	// Payload Violation'" and the connection is closed.
	MaxPayload int
	// MaxPending bounds the bytes waiting to be written to one client.
	// A client that falls further behind is a slow consumer: its
	// connection is closed and what was waiting for it dropped, so the
	// broker's memory never grows with a backlog.
	MaxPending int
	// MaxControlLine is the longest protocol line (PUB, SUB, CONNECT...)
	// accepted.
	MaxControlLine int
	// WriteDeadline is how long one write to a client may block before
	// the client is cut off as a slow consumer.
	WriteDeadline time.Duration
	// PingInterval is how often the server PINGs a client it has heard
	// nothing from; MaxPingsOut PINGs without a PONG close the
	// connection ("-ERR 'Stale Connection'").
	PingInterval time.Duration
	MaxPingsOut  int
	// AuthTimeout is how long a client may take to send CONNECT when
	// authentication is required.
	AuthTimeout time.Duration

	// JetStream says in INFO that the JetStream API is served (the
	// caller serves it, with NewJetStream).
	JetStream bool

	// ServerName is INFO's server_name (default "wharf").
	ServerName string
	Logger     *slog.Logger // nil: discard
}

func (c Config) withDefaults() Config {
	setDefault(&c.MaxPayload, DefaultMaxPayload)
	setDefault(&c.MaxPending, DefaultMaxPending)
	setDefault(&c.MaxControlLine, DefaultMaxControlLine)
	setDefault(&c.WriteDeadline, DefaultWriteDeadline)
	setDefault(&c.PingInterval, DefaultPingInterval)
	setDefault(&c.MaxPingsOut, DefaultMaxPingsOut)
	setDefault(&c.AuthTimeout, DefaultAuthTimeout)
	if c.ServerName == "" {
		c.ServerName = "wharf"
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func setDefault[T int | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

func (c Config) validate() error {
	if c.Token != "" && len(c.Users) > 0 {
		return errors.New("nats: a token and users cannot both be configured")
	}
	if c.MaxPayload > c.MaxPending {
		return errors.New("nats: max payload larger than max pending")
	}
	return nil
}

// authRequired reports whether clients must authenticate.
func (c Config) authRequired() bool { return c.Token != "" || len(c.Users) > 0 }
