package amqp

import (
	"bufio"
	"bytes"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/wharf-mq/wharf/internal/access"
	"github.com/wharf-mq/wharf/internal/users"
	"github.com/wharf-mq/wharf/internal/version"
)

// Defaults, RabbitMQ's where it has one.
const (
	DefaultChannelMax       = 2047             // RabbitMQ's channel_max
	DefaultFrameMax         = 131072           // RabbitMQ's frame_max
	DefaultHeartbeat        = 60 * time.Second // RabbitMQ's heartbeat
	DefaultMaxMessageSize   = 16 << 20         // RabbitMQ 4.x max_message_size
	DefaultDiskFreeLimit    = 50 << 20         // RabbitMQ's disk_free_limit
	DefaultHandshakeTimeout = 10 * time.Second // RabbitMQ's handshake_timeout
	// DefaultOutboundLimit bounds the delivery bytes a connection holds for
	// a socket that is not keeping up; see Config.OutboundLimit.
	DefaultOutboundLimit = 4 << 20
	// DefaultFlowBacklog is the ready backlog above which a publisher is
	// slowed; see Config.FlowBacklog. 400 is RabbitMQ's initial credit
	// of a queue toward a channel (credit_flow_default_credit): how far a
	// queue may fall behind its publisher there. A flat-out publisher
	// holds the queue near this backlog, so it sets publish-to-deliver
	// latency; at 400 the fanout benchmark's throughput does not drop.
	DefaultFlowBacklog = 400
	// fallbackHighWatermark is the memory high-water mark when the machine's
	// RAM cannot be read.
	fallbackHighWatermark = 1 << 30
)

// Config configures a Server. The zero value of every field means its
// default.
type Config struct {
	// Users is the user store logins are checked against: PLAIN and
	// AMQPLAIN passwords, and over TLS the user a client certificate
	// names (EXTERNAL). Required.
	Users *users.Store
	// Access holds what each user may do in each vhost: connection.open
	// needs a permission in the vhost, and every operation is checked
	// as RabbitMQ checks it. Required.
	Access *access.Store
	// Limiter slows down repeated failed logins from one address (the
	// node shares one among its listeners); nil: no limit.
	Limiter users.LoginLimiter
	// LoopbackUsers may only connect from a loopback address, like
	// RabbitMQ's loopback_users. nil: guest. Empty non-nil: nobody is
	// restricted.
	LoopbackUsers []string

	ChannelMax uint16 // proposed in connection.tune; default 2047
	FrameMax   uint32 // proposed in connection.tune; default 131072
	// Heartbeat is proposed in connection.tune, rounded to seconds; the
	// client's answer decides. Default 60 s; negative proposes 0 (none).
	Heartbeat time.Duration
	// MaxMessageSize is the largest message body accepted (406 above it).
	MaxMessageSize uint64
	// HandshakeTimeout bounds the time from accept to connection.open.
	HandshakeTimeout time.Duration

	// MemoryHighWatermark: when the messages held by the registry
	// (mq.Registry.MemoryUsed) reach it, publishing connections are
	// blocked until usage falls below it. Default 40% of RAM (1 GiB when
	// RAM is unknown); negative disables the alarm.
	MemoryHighWatermark int64
	// DataDir is the directory whose file system is watched for free space;
	// "" disables the disk alarm.
	DataDir string
	// DiskFreeLimit: when DataDir's file system has less free space,
	// publishing connections are blocked. Default 50 MB; negative disables.
	DiskFreeLimit int64
	// AlarmCheckInterval is how often the alarms are re-evaluated (memory
	// is also checked after every publish). Default 100 ms; disk space is
	// read at most once a second.
	AlarmCheckInterval time.Duration

	// OutboundLimit bounds the delivery bytes waiting in a connection's
	// writer. Above it the connection's consumers take no more deliveries
	// until the socket drains below half of it, so a slow reader cannot
	// make the broker buffer without bound (no-ack consumers have no
	// prefetch to do it). Default 4 MiB.
	OutboundLimit int64

	// FlowBacklog is publisher flow control, the silent back-pressure
	// RabbitMQ's credit flow gives: after a publish leaves more than this
	// many ready (undelivered) messages in a queue it went to, the
	// publishing connection stops reading its socket for flowPause, so a
	// fast publisher cannot outrun the consumers without bound and
	// publish-to-deliver latency stays bounded. No connection.blocked is
	// sent (that is for the memory and disk alarms). Default 400;
	// negative disables.
	FlowBacklog int

	// Version is announced as the server's version property. Default:
	// this build's (internal/version).
	Version string
	// Logger receives connection events; nil means slog.Default().
	Logger *slog.Logger
}

// withDefaults fills in zero fields.
func (c Config) withDefaults() Config {
	if c.LoopbackUsers == nil {
		c.LoopbackUsers = []string{"guest"}
	}
	if c.ChannelMax == 0 {
		c.ChannelMax = DefaultChannelMax
	}
	if c.FrameMax == 0 {
		c.FrameMax = DefaultFrameMax
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = DefaultHeartbeat
	}
	if c.MaxMessageSize == 0 {
		c.MaxMessageSize = DefaultMaxMessageSize
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if c.MemoryHighWatermark == 0 {
		c.MemoryHighWatermark = defaultHighWatermark()
	}
	if c.DiskFreeLimit == 0 {
		c.DiskFreeLimit = DefaultDiskFreeLimit
	}
	if c.AlarmCheckInterval <= 0 {
		c.AlarmCheckInterval = 100 * time.Millisecond
	}
	if c.OutboundLimit <= 0 {
		c.OutboundLimit = DefaultOutboundLimit
	}
	if c.FlowBacklog == 0 {
		c.FlowBacklog = DefaultFlowBacklog
	}
	if c.Version == "" {
		c.Version = version.String()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// heartbeatSeconds is the heartbeat proposed in connection.tune.
func (c Config) heartbeatSeconds() uint16 {
	if c.Heartbeat < 0 {
		return 0
	}
	return uint16(min(c.Heartbeat/time.Second, 65535))
}

// defaultHighWatermark is 40% of the machine's RAM, RabbitMQ's
// vm_memory_high_watermark default.
func defaultHighWatermark() int64 {
	if total := totalMemory(); total > 0 {
		return total * 4 / 10
	}
	return fallbackHighWatermark
}

// totalMemory reads MemTotal from /proc/meminfo; 0 if it cannot.
func totalMemory() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		fields := bytes.Fields(sc.Bytes())
		if len(fields) >= 2 && string(fields[0]) == "MemTotal:" {
			kb, err := strconv.ParseInt(string(fields[1]), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
