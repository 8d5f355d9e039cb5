// Package quota is Kafka's client quotas for Wharf's Kafka listeners: the
// quotas themselves (set and listed with AlterClientQuotas and
// DescribeClientQuotas, kept in the metadata log) and their enforcement
// by throttling, as Kafka's ClientQuotaManager does.
//
// A quota belongs to an entity: a user, a client id, or a user and a
// client id, where either may be the default (<default>: every user or
// client id that has no quota of its own). Its keys are
// producer_byte_rate and consumer_byte_rate (bytes per second of produce
// requests and fetch responses) and request_percentage (time spent
// handling the client's requests, in percent of one thread).
//
// A client's quota of each kind comes from the most specific entity that
// sets it, in Kafka's order: user and client id; user and default client
// id; user; default user and client id; default user and default client
// id; default user; client id; default client id. The rate is measured
// over Kafka's 11 one-second windows and shared by everything the entity
// covers (all clients of a user with a user quota; each user apart with a
// default-user quota). A client over its quota is given the time it must
// wait for its rate to come back down, (rate - quota) / quota times the
// measuring window, which the front end sends as throttle_time_ms and
// honours by not reading from the connection meanwhile (KIP-219).
//
// In a cluster every node's Manager follows the metadata log, so a quota
// set through any node applies on each as that node applies the log; the
// rates are measured per node, as each Kafka broker measures its own.
package quota

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// The quota keys.
const (
	ProducerByteRate  = "producer_byte_rate"
	ConsumerByteRate  = "consumer_byte_rate"
	RequestPercentage = "request_percentage"
)

// Keys lists the quota keys, in Kafka's order.
var Keys = []string{ProducerByteRate, ConsumerByteRate, RequestPercentage}

// integerKeys must hold whole numbers (Kafka's LONG configs).
var integerKeys = []string{ProducerByteRate, ConsumerByteRate}

// The entity types, as Kafka names them.
const (
	TypeUser     = "user"
	TypeClientID = "client-id"
	TypeIP       = "ip"
)

// Part is one type of an entity: absent, the default, or a name.
type Part struct {
	Given   bool // the entity has this type
	Default bool // <default>, when Given
	Name    string
}

// Named is a Part for name.
func Named(name string) Part { return Part{Given: true, Name: name} }

// DefaultPart is the <default> Part.
var DefaultPart = Part{Given: true, Default: true}

func (p Part) String() string {
	switch {
	case !p.Given:
		return ""
	case p.Default:
		return "<default>"
	}
	return p.Name
}

// Entity is a quota entity: a user, a client id, or both.
type Entity struct {
	User, ClientID Part
}

func (e Entity) String() string {
	switch {
	case e.User.Given && e.ClientID.Given:
		return fmt.Sprintf("user %s, client-id %s", e.User, e.ClientID)
	case e.User.Given:
		return "user " + e.User.String()
	}
	return "client-id " + e.ClientID.String()
}

// ErrInvalid is an entity, key or value Kafka refuses with
// INVALID_REQUEST; the wrapping error has Kafka's message.
var ErrInvalid = errors.New("invalid client quota")

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// ParseEntity builds an entity from the (type, name) pairs of a request;
// a nil name is the default.
func ParseEntity(pairs []EntityPair) (Entity, error) {
	var e Entity
	if len(pairs) == 0 {
		return e, invalidf("Invalid empty client quota entity")
	}
	for _, p := range pairs {
		var part *Part
		switch p.Type {
		case TypeUser:
			part = &e.User
		case TypeClientID:
			part = &e.ClientID
		case TypeIP:
			return e, invalidf("Wharf does not support ip quotas (connection_creation_rate)")
		default:
			return e, invalidf("Unhandled client quota entity type: %s", p.Type)
		}
		if part.Given {
			return e, invalidf("Invalid empty client quota entity, duplicate entity entry %s", p.Type)
		}
		if p.Name != nil && *p.Name == "" {
			return e, invalidf("Empty %s not supported", p.Type)
		}
		*part = DefaultPart
		if p.Name != nil {
			*part = Named(*p.Name)
		}
	}
	return e, nil
}

// EntityPair is one (type, name) of a request's entity.
type EntityPair struct {
	Type string
	Name *string // nil: <default>
}

// CheckValue checks a value to be set for key, as Kafka does.
func CheckValue(key string, value float64) error {
	if !slices.Contains(Keys, key) {
		return invalidf("Invalid configuration key %s", key)
	}
	if slices.Contains(integerKeys, key) && math.Abs(math.Round(value)-value) > 1e-6 {
		return invalidf("Configuration %s must be a Long value", key)
	}
	return nil
}
