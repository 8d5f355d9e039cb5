package nats

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/wharf-mq/wharf/internal/jetstream"
)

// consumerInfoResponse carries a consumer's info.
type consumerInfoResponse struct {
	apiResponse
	*jetstream.ConsumerInfo
}

// createRequest is CONSUMER.CREATE's body.
type createRequest struct {
	Stream string                   `json:"stream_name"`
	Config jetstream.ConsumerConfig `json:"config"`
	Action string                   `json:"action"`
}

var consumerActions = map[string]jetstream.ConsumerAction{
	"": jetstream.ActionCreateOrUpdate, "create": jetstream.ActionCreate, "update": jetstream.ActionUpdate,
}

// createConsumer answers the three forms of consumer creation:
// CONSUMER.CREATE.<stream> (the name, if any, in the config),
// CONSUMER.CREATE.<stream>.<name>[.<filter subject>] and
// CONSUMER.DURABLE.CREATE.<stream>.<durable>; rest are the tokens after
// the stream's name.
func (js *JetStream) createConsumer(stream string, rest []string, durableForm bool, reply string, body []byte) {
	resp := consumerInfoResponse{apiResponse: apiResponse{Type: responseType("consumer_create")}}
	resp.Error = js.checkCreate(stream, rest, durableForm, body, func(cfg jetstream.ConsumerConfig, action jetstream.ConsumerAction) *jetstream.APIError {
		var err *jetstream.APIError
		resp.ConsumerInfo, err = js.core.CreateConsumer(stream, cfg, action)
		return err
	})
	js.respond(reply, resp, resp.Error)
}

// checkCreate reads a create request and checks it agrees with its
// subject, as nats-server does, before create.
func (js *JetStream) checkCreate(stream string, rest []string, durableForm bool, body []byte,
	create func(jetstream.ConsumerConfig, jetstream.ConsumerAction) *jetstream.APIError) *jetstream.APIError {
	var req createRequest
	if err := decode(body, &req); err != nil {
		return err
	}
	if req.Stream != stream {
		return jetstream.ErrStreamMismatch
	}
	action, ok := consumerActions[req.Action]
	if !ok {
		return jetstream.ErrInvalidJSON(errUnknownAction(req.Action))
	}
	cfg := req.Config
	name := cfg.Name
	if len(rest) > 0 {
		name = rest[0]
	}
	if strings.ContainsAny(name, `\/`) {
		return jetstream.ErrConsumerNamePathSep
	}
	switch {
	case durableForm:
		if cfg.Durable == "" {
			return jetstream.ErrConsumerDurableNotSet
		}
		if name != cfg.Durable {
			return jetstream.ErrConsumerDurableMismatch
		}
	case len(rest) > 0:
		if cfg.Durable != "" && name != cfg.Durable {
			return jetstream.ErrConsumerDurableMismatch
		}
		cfg.Name = name
		if filter := strings.Join(rest[1:], "."); filter != "" {
			if len(cfg.FilterSubjects) > 0 {
				return &jetstream.APIError{Code: 400, ErrCode: 10137, Description: "consumer with multiple subject filters cannot use subject based API"}
			}
			if cfg.FilterSubject != filter {
				return jetstream.ErrConsumerFilterMismatch
			}
		}
	case cfg.Durable != "":
		return jetstream.ErrConsumerEphemeralDurable
	}
	return create(cfg, action)
}

type errUnknownAction string

func (e errUnknownAction) Error() string {
	return "unknown consumer action " + strconv.Quote(string(e))
}

// consumerListing answers CONSUMER.NAMES and CONSUMER.LIST.
func (js *JetStream) consumerListing(op, stream, reply string, body []byte) {
	typ := responseType("consumer_" + strings.ToLower(op))
	var req listRequest
	err := decode(body, &req)
	var infos []*jetstream.ConsumerInfo
	if err == nil {
		infos, err = js.core.Consumers(stream)
	}
	if err != nil {
		js.respond(reply, struct {
			apiResponse
			paged
			Consumers []string `json:"consumers"`
		}{apiResponse: apiResponse{Type: typ, Error: err}}, err)
		return
	}
	if op == "NAMES" {
		names := make([]string, len(infos))
		for i, info := range infos {
			names[i] = info.Name
		}
		from, to, p := page(len(names), req.Offset, namesPageSize)
		js.respond(reply, struct {
			apiResponse
			paged
			Consumers []string `json:"consumers"`
		}{apiResponse{Type: typ}, p, names[from:to]}, nil)
		return
	}
	from, to, p := page(len(infos), req.Offset, listPageSize)
	js.respond(reply, struct {
		apiResponse
		paged
		Consumers []*jetstream.ConsumerInfo `json:"consumers"`
	}{apiResponse{Type: typ}, p, infos[from:to]}, nil)
}

// consumerRequest answers CONSUMER.INFO and CONSUMER.DELETE.
func (js *JetStream) consumerRequest(op, stream, name, reply string) {
	if op == "INFO" {
		resp := consumerInfoResponse{apiResponse: apiResponse{Type: responseType("consumer_info")}}
		resp.ConsumerInfo, resp.Error = js.core.ConsumerInfo(stream, name)
		js.respond(reply, resp, resp.Error)
		return
	}
	resp := struct {
		apiResponse
		Success bool `json:"success,omitempty"`
	}{apiResponse: apiResponse{Type: responseType("consumer_delete")}}
	resp.Error = js.core.DeleteConsumer(stream, name)
	resp.Success = resp.Error == nil
	js.respond(reply, resp, resp.Error)
}

// next takes a pull request: a batch size, or JSON, or nothing (one
// message).
func (js *JetStream) next(stream, consumer, reply string, body []byte) {
	req, err := parseNext(body)
	if err != nil {
		js.core.BadNextRequest(reply, err)
		return
	}
	js.core.Next(stream, consumer, reply, req)
}

func parseNext(body []byte) (jetstream.NextRequest, error) {
	body = bytes.TrimSpace(body)
	req := jetstream.NextRequest{Batch: 1}
	switch {
	case len(body) == 0:
	case body[0] == '{':
		req.Batch = 0
		if err := json.Unmarshal(body, &req); err != nil {
			return req, err
		}
	default:
		if n, err := strconv.Atoi(string(body)); err == nil {
			req.Batch = n
		}
	}
	return req, nil
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
