package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterConfigs (key 33), v0-v2.
//
// Replaces a topic's whole set of config overrides with the given ones
// (configs not listed return to their defaults), or with ValidateOnly just
// checks them. A null value, a config named twice or a resource named twice
// is INVALID_REQUEST; an unknown config or bad value INVALID_CONFIG. Broker
// configs are static in Wharf: altering one is INVALID_REQUEST (an empty
// change to this broker succeeds).

func (s *Server) handleAlterConfigs(r *request, req *kmsg.AlterConfigsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	dup := duplicateResources(len(req.Resources), func(i int) configResource {
		return configResource{req.Resources[i].ResourceType, req.Resources[i].ResourceName}
	})
	for i, rr := range req.Resources {
		sr := kmsg.NewAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		var err error
		if dup[i] {
			err = kafkaErrorf(kerr.InvalidRequest, "resource %v %q appears more than once", rr.ResourceType, rr.ResourceName)
		} else if err = s.configResourceAllowed(r, rr.ResourceType, rr.ResourceName, opAlterConfigs); err == nil {
			err = s.alterConfigs(rr, req.ValidateOnly)
		}
		sr.ErrorCode, sr.ErrorMessage = errorCode(err), errorMessage(err)
		resp.Resources = append(resp.Resources, sr)
	}
	return resp, nil
}

func (s *Server) alterConfigs(rr kmsg.AlterConfigsRequestResource, validateOnly bool) error {
	set := make(map[string]*string, len(rr.Configs))
	for _, c := range rr.Configs {
		if _, twice := set[c.Name]; twice {
			return kafkaErrorf(kerr.InvalidRequest, "config %q appears more than once", c.Name)
		}
		if c.Value == nil {
			return kafkaErrorf(kerr.InvalidRequest, "null value not supported for config %q", c.Name)
		}
		set[c.Name] = c.Value
	}
	switch rr.ResourceType {
	case kmsg.ConfigResourceTypeTopic:
		return s.broker.AlterTopicConfigs(rr.ResourceName, set, false, validateOnly)
	case kmsg.ConfigResourceTypeBroker:
		return s.alterBrokerConfigs(rr.ResourceName, len(set))
	default:
		return kafkaErrorf(kerr.InvalidRequest, "config resource type %v is not supported", rr.ResourceType)
	}
}

// alterBrokerConfigs refuses any change to broker configs, which Wharf
// only reads at start-up.
func (s *Server) alterBrokerConfigs(name string, changes int) error {
	if name != "" {
		if err := s.checkBrokerResource(name); err != nil {
			return err
		}
	}
	if changes > 0 {
		return kafkaErrorf(kerr.InvalidRequest, "broker configs cannot be changed while Wharf runs")
	}
	return nil
}

// configResource identifies a config resource in a request.
type configResource struct {
	typ  kmsg.ConfigResourceType
	name string
}

// duplicateResources marks the resources of a request that appear more
// than once; Kafka refuses every copy.
func duplicateResources(n int, at func(int) configResource) []bool {
	counts := make(map[configResource]int, n)
	for i := range n {
		counts[at(i)]++
	}
	dup := make([]bool, n)
	for i := range n {
		dup[i] = counts[at(i)] > 1
	}
	return dup
}
