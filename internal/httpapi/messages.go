package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"time"
	"unicode/utf8"

	"github.com/wharf-mq/wharf/internal/amqpwire"
)

// Messages as RabbitMQ's API takes them (POST .../publish) and shows them
// (POST .../get): properties as a JSON object with the AMQP property
// names in snake case, the payload as text or base64.

// propertiesJSON shows the properties a message carries.
func propertiesJSON(p *amqpwire.Properties) map[string]any {
	out := map[string]any{}
	f := p.Flags()
	str := func(flag amqpwire.PropertyFlags, name, v string) {
		if f&flag != 0 {
			out[name] = v
		}
	}
	str(amqpwire.FlagContentType, "content_type", p.ContentType)
	str(amqpwire.FlagContentEncoding, "content_encoding", p.ContentEncoding)
	if f&amqpwire.FlagHeaders != 0 {
		out["headers"] = jsonTable(p.Headers)
	}
	if f&amqpwire.FlagDeliveryMode != 0 {
		out["delivery_mode"] = p.DeliveryMode
	}
	if f&amqpwire.FlagPriority != 0 {
		out["priority"] = p.Priority
	}
	str(amqpwire.FlagCorrelationID, "correlation_id", p.CorrelationID)
	str(amqpwire.FlagReplyTo, "reply_to", p.ReplyTo)
	str(amqpwire.FlagExpiration, "expiration", p.Expiration)
	str(amqpwire.FlagMessageID, "message_id", p.MessageID)
	if f&amqpwire.FlagTimestamp != 0 {
		out["timestamp"] = p.Timestamp.Unix()
	}
	str(amqpwire.FlagType, "type", p.Type)
	str(amqpwire.FlagUserID, "user_id", p.UserID)
	str(amqpwire.FlagAppID, "app_id", p.AppID)
	str(amqpwire.FlagClusterID, "cluster_id", p.ClusterID)
	return out
}

// publishProperties is the properties object of a publish request.
// Unknown keys are ignored, as RabbitMQ does; a known key with a value of
// the wrong type is a fieldError.
type publishProperties struct {
	ContentType     string         `json:"content_type"`
	ContentEncoding string         `json:"content_encoding"`
	Headers         map[string]any `json:"headers"`
	DeliveryMode    *propertyByte  `json:"delivery_mode"`
	Priority        *propertyByte  `json:"priority"`
	CorrelationID   string         `json:"correlation_id"`
	ReplyTo         string         `json:"reply_to"`
	Expiration      string         `json:"expiration"`
	MessageID       string         `json:"message_id"`
	Timestamp       *flexInt       `json:"timestamp"`
	Type            string         `json:"type"`
	UserID          string         `json:"user_id"`
	AppID           string         `json:"app_id"`
	ClusterID       string         `json:"cluster_id"`
}

// propertyByte is delivery_mode or priority: an integer from 0 to 255.
type propertyByte uint8

func (b *propertyByte) UnmarshalJSON(data []byte) error {
	var n int
	if err := json.Unmarshal(data, &n); err != nil || n < 0 || n > 255 {
		return &fieldError{"not_int", string(bytes.Trim(data, `"`))}
	}
	*b = propertyByte(n)
	return nil
}

// wireProperties turns a publish request's properties into AMQP ones.
func (pp *publishProperties) wireProperties() amqpwire.Properties {
	p := amqpwire.Properties{
		ContentType: pp.ContentType, ContentEncoding: pp.ContentEncoding, Headers: tableOf(pp.Headers),
		CorrelationID: pp.CorrelationID, ReplyTo: pp.ReplyTo, Expiration: pp.Expiration, MessageID: pp.MessageID,
		Type: pp.Type, UserID: pp.UserID, AppID: pp.AppID, ClusterID: pp.ClusterID,
	}
	if pp.DeliveryMode != nil {
		p.DeliveryMode = uint8(*pp.DeliveryMode)
		p.Present |= amqpwire.FlagDeliveryMode
	}
	if pp.Priority != nil {
		p.Priority = uint8(*pp.Priority)
		p.Present |= amqpwire.FlagPriority
	}
	if pp.Timestamp != nil {
		p.Timestamp = time.Unix(pp.Timestamp.V, 0).UTC()
		p.Present |= amqpwire.FlagTimestamp
	}
	return p
}

// decodePayload reads a publish request's payload in its encoding
// ("string" or "base64").
func decodePayload(payload, encoding string) ([]byte, *fieldError) {
	switch encoding {
	case "string":
		return []byte(payload), nil
	case "base64":
		b, err := base64.StdEncoding.DecodeString(payload)
		if err != nil {
			return nil, &fieldError{"not_base64", payload}
		}
		return b, nil
	}
	return nil, &fieldError{"unsupported_encoding", encoding}
}

// encodePayload shows a payload, cut to truncate bytes if truncate > 0:
// as text when asked for "auto" and it is UTF-8, in base64 otherwise.
func encodePayload(body []byte, encoding string, truncate int64) (payload, used string) {
	if truncate > 0 && int64(len(body)) > truncate {
		body = body[:truncate]
	}
	if encoding == "auto" && utf8.Valid(body) {
		return string(body), "string"
	}
	return base64.StdEncoding.EncodeToString(body), "base64"
}
