package kafka

import (
	"fmt"
	"net"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/broker"
)

// DescribeConfigs (key 32), v0-v4.
//
// TOPIC resources report every config the broker core knows for the topic
// (overrides as DYNAMIC_TOPIC_CONFIG, the rest as DEFAULT_CONFIG). BROKER
// resources named after this node report the broker's static settings the
// front end can see (node id, log dir, listener, request size limit); an
// empty name asks for dynamic broker defaults, of which there are none;
// another broker's ID is INVALID_REQUEST, as in Kafka. Other resource types
// (broker loggers, client metrics, groups) are INVALID_REQUEST.
//
// ConfigNames filters (null: all; unknown names are left out). v1+ reports
// Source and, if asked, synonyms (the entry itself and, for a default topic
// config, the broker config it falls back to); v3+ the config type.
// Documentation is not available (null).

func (s *Server) handleDescribeConfigs(req *kmsg.DescribeConfigsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		entries, source, err := s.resourceConfigs(rr.ResourceType, rr.ResourceName)
		if err != nil {
			sr.ErrorCode = errorCode(err)
			sr.ErrorMessage = errorMessage(err)
			resp.Resources = append(resp.Resources, sr)
			continue
		}
		for _, e := range entries {
			if rr.ConfigNames != nil && !slices.Contains(rr.ConfigNames, e.Name) {
				continue
			}
			sr.Configs = append(sr.Configs, describeConfig(e, source(e), rr.ResourceType, req))
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return resp, nil
}

// resourceConfigs returns a resource's configs and how to tell each one's
// source.
func (s *Server) resourceConfigs(typ kmsg.ConfigResourceType, name string) (
	[]broker.ConfigEntry, func(broker.ConfigEntry) kmsg.ConfigSource, error) {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		t, err := s.broker.Topic(name)
		if err != nil {
			if !validTopicName(name) {
				return nil, nil, kafkaErrorf(kerr.InvalidTopicException, "invalid topic name %q", name)
			}
			return nil, nil, err
		}
		return t.Configs(), topicConfigSource, nil
	case kmsg.ConfigResourceTypeBroker:
		staticBroker := func(broker.ConfigEntry) kmsg.ConfigSource { return kmsg.ConfigSourceStaticBrokerConfig }
		if name == "" {
			return nil, staticBroker, nil // no dynamic broker defaults
		}
		if err := s.checkBrokerResource(name); err != nil {
			return nil, nil, err
		}
		return s.brokerConfigs(), staticBroker, nil
	default:
		return nil, nil, kafkaErrorf(kerr.InvalidRequest, "config resource type %v is not supported", typ)
	}
}

// checkBrokerResource accepts a BROKER resource named after this node.
func (s *Server) checkBrokerResource(name string) error {
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil || int32(id) != s.broker.NodeID() {
		return kafkaErrorf(kerr.InvalidRequest, "unexpected broker id, expected %d or empty string, but received %q",
			s.broker.NodeID(), name)
	}
	return nil
}

// brokerConfigs are the broker settings visible to the front end, all
// static (set at start-up).
func (s *Server) brokerConfigs() []broker.ConfigEntry {
	node := strconv.Itoa(int(s.broker.NodeID()))
	listener := fmt.Sprintf("PLAINTEXT://%s", net.JoinHostPort(s.cfg.AdvertisedHost, strconv.Itoa(int(s.cfg.AdvertisedPort))))
	entries := []broker.ConfigEntry{
		{Name: "advertised.listeners", Value: listener, ReadOnly: true},
		{Name: "broker.id", Value: node, ReadOnly: true},
		{Name: "log.dirs", Value: s.broker.DataDir(), ReadOnly: true},
		{Name: "node.id", Value: node, ReadOnly: true},
		{Name: "socket.request.max.bytes", Value: strconv.Itoa(int(s.cfg.MaxRequestBytes)), ReadOnly: true},
	}
	return entries
}

var brokerConfigTypes = map[string]kmsg.ConfigType{
	"broker.id":                kmsg.ConfigTypeInt,
	"node.id":                  kmsg.ConfigTypeInt,
	"socket.request.max.bytes": kmsg.ConfigTypeInt,
	"log.dirs":                 kmsg.ConfigTypeString,
	"advertised.listeners":     kmsg.ConfigTypeString,
}

// describeConfig builds one config entry of a DescribeConfigs response.
func describeConfig(e broker.ConfigEntry, source kmsg.ConfigSource, typ kmsg.ConfigResourceType,
	req *kmsg.DescribeConfigsRequest) kmsg.DescribeConfigsResponseResourceConfig {
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name = e.Name
	c.Value = configValue(e)
	c.ReadOnly = e.ReadOnly
	c.IsDefault = source == kmsg.ConfigSourceDefaultConfig
	c.Source = source
	c.IsSensitive = e.Sensitive
	if typ == kmsg.ConfigResourceTypeTopic {
		c.ConfigType = topicConfigType(e.Name)
	} else if ct, ok := brokerConfigTypes[e.Name]; ok {
		c.ConfigType = ct
	} else {
		c.ConfigType = kmsg.ConfigTypeString
	}
	if req.IncludeSynonyms {
		// Where the value comes from, as Kafka lists it: the topic
		// override itself, or for a default the broker config the
		// topic config falls back to.
		syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
		syn.Name, syn.Value, syn.Source = c.Name, c.Value, source
		if info, ok := topicConfigInfos[e.Name]; ok && typ == kmsg.ConfigResourceTypeTopic && e.IsDefault {
			syn.Name = info.brokerSynonym
		}
		c.ConfigSynonyms = append(c.ConfigSynonyms, syn)
	}
	return c
}
