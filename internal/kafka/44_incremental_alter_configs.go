package kafka

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// IncrementalAlterConfigs (key 44), v0-v1.
//
// Per topic config: SET (a null value is INVALID_REQUEST), DELETE (back to
// the default), and for list-typed configs (cleanup.policy) APPEND and
// SUBTRACT, computed from the current value and applied as a SET; APPEND or
// SUBTRACT on a non-list config is INVALID_CONFIG, as in Kafka. A config
// named twice in one resource, or a resource named twice, is
// INVALID_REQUEST. Broker configs are static (see AlterConfigs).

func (s *Server) handleIncrementalAlterConfigs(r *request, req *kmsg.IncrementalAlterConfigsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	dup := duplicateResources(len(req.Resources), func(i int) configResource {
		return configResource{req.Resources[i].ResourceType, req.Resources[i].ResourceName}
	})
	for i, rr := range req.Resources {
		sr := kmsg.NewIncrementalAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		var err error
		if dup[i] {
			err = kafkaErrorf(kerr.InvalidRequest, "resource %v %q appears more than once", rr.ResourceType, rr.ResourceName)
		} else if err = s.configResourceAllowed(r, rr.ResourceType, rr.ResourceName, opAlterConfigs); err == nil {
			err = s.incrementalAlterConfigs(rr, req.ValidateOnly)
		}
		sr.ErrorCode, sr.ErrorMessage = errorCode(err), errorMessage(err)
		resp.Resources = append(resp.Resources, sr)
	}
	return resp, nil
}

func (s *Server) incrementalAlterConfigs(rr kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) error {
	switch rr.ResourceType {
	case kmsg.ConfigResourceTypeTopic:
	case kmsg.ConfigResourceTypeBroker:
		return s.alterBrokerConfigs(rr.ResourceName, len(rr.Configs))
	default:
		return kafkaErrorf(kerr.InvalidRequest, "config resource type %v is not supported", rr.ResourceType)
	}
	t, err := s.broker.Topic(rr.ResourceName)
	if err != nil {
		return err
	}
	current := make(map[string]string)
	for _, e := range t.Configs() {
		current[e.Name] = e.Value
	}

	set := make(map[string]*string, len(rr.Configs))
	for _, c := range rr.Configs {
		if _, twice := set[c.Name]; twice {
			return kafkaErrorf(kerr.InvalidRequest, "config %q appears more than once", c.Name)
		}
		switch c.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			if c.Value == nil {
				return kafkaErrorf(kerr.InvalidRequest, "null value not supported for config %q", c.Name)
			}
			set[c.Name] = c.Value
		case kmsg.IncrementalAlterConfigOpDelete:
			set[c.Name] = nil
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			if topicConfigType(c.Name) != kmsg.ConfigTypeList {
				return kafkaErrorf(kerr.InvalidConfig, "config value %v is not allowed for config key %q, which is not a list",
					c.Op, c.Name)
			}
			v := applyListOp(current[c.Name], c.Value, c.Op == kmsg.IncrementalAlterConfigOpAppend)
			set[c.Name] = &v
		default:
			return kafkaErrorf(kerr.InvalidRequest, "unknown config operation %d for config %q", c.Op, c.Name)
		}
	}
	return s.broker.AlterTopicConfigs(rr.ResourceName, set, true, validateOnly)
}

// applyListOp appends the comma-separated values of operand to the list
// value current (skipping ones already there), or subtracts them.
func applyListOp(current string, operand *string, appendValues bool) string {
	list := splitList(current)
	var values []string
	if operand != nil {
		values = splitList(*operand)
	}
	for _, v := range values {
		has := slices.Contains(list, v)
		switch {
		case appendValues && !has:
			list = append(list, v)
		case !appendValues && has:
			list = slices.DeleteFunc(list, func(x string) bool { return x == v })
		}
	}
	return strings.Join(list, ",")
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}
