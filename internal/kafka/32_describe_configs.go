package kafka

import (
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/broker"
)

// DescribeConfigs (key 32), v0-v4.
//
// TOPIC resources report every config the broker core knows for the topic
// (overrides as DYNAMIC_TOPIC_CONFIG, defaults the broker was started
// with, such as --min-insync-replicas, as STATIC_BROKER_CONFIG, the rest
// as DEFAULT_CONFIG). BROKER resources named after this node report the
// broker core's settings plus the listener and request size limit
// (DEFAULT_CONFIG or STATIC_BROKER_CONFIG: nothing is dynamic); an empty
// name asks for dynamic broker defaults, of which there are none;
// another broker's ID is INVALID_REQUEST, as in Kafka. Other resource types
// (broker loggers, client metrics, groups) are INVALID_REQUEST.
//
// ConfigNames filters (null: all; unknown names are left out). v1+ reports
// Source and, if asked, synonyms (the entry itself and, for a default topic
// config, the broker config it falls back to); v3+ the config type.
// Documentation is not available (null). A topic needs DESCRIBE_CONFIGS
// (else TOPIC_AUTHORIZATION_FAILED), the broker DESCRIBE_CONFIGS on the
// cluster (else CLUSTER_AUTHORIZATION_FAILED); AlterConfigs and
// IncrementalAlterConfigs need ALTER_CONFIGS alike.

func (s *Server) handleDescribeConfigs(r *request, req *kmsg.DescribeConfigsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		var (
			entries []broker.ConfigEntry
			source  func(broker.ConfigEntry) kmsg.ConfigSource
		)
		err := s.configResourceAllowed(r, rr.ResourceType, rr.ResourceName, opDescribeConfigs)
		if err == nil {
			entries, source, err = s.resourceConfigs(rr.ResourceType, rr.ResourceName)
		}
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
		if name == "" {
			return nil, brokerConfigSource, nil // no dynamic broker defaults
		}
		if err := s.checkBrokerResource(name); err != nil {
			return nil, nil, err
		}
		return s.brokerConfigs(), brokerConfigSource, nil
	default:
		return nil, nil, kafkaErrorf(kerr.InvalidRequest, "config resource type %v is not supported", typ)
	}
}

// configResourceAllowed checks op (DESCRIBE_CONFIGS or ALTER_CONFIGS) on
// a config resource: the topic, or the cluster for the broker.
func (s *Server) configResourceAllowed(r *request, typ kmsg.ConfigResourceType, name string, op kmsg.ACLOperation) error {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		if !s.allowed(r, op, resTopic, name) {
			return errTopicDenied
		}
	case kmsg.ConfigResourceTypeBroker:
		if !s.allowedCluster(r, op) {
			return errClusterDenied
		}
	}
	return nil
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

// brokerConfigs are the broker core's settings plus the front end's own
// (listener, request size limit), sorted by name. All are static: set at
// start-up.
func (s *Server) brokerConfigs() []broker.ConfigEntry {
	entries := append(s.broker.Configs(),
		broker.ConfigEntry{Name: "advertised.listeners", Value: s.advertisedListeners(), ReadOnly: true},
		broker.ConfigEntry{Name: "socket.request.max.bytes", Value: strconv.Itoa(int(s.cfg.MaxRequestBytes)),
			IsDefault: s.cfg.MaxRequestBytes == DefaultMaxRequestBytes, ReadOnly: true},
	)
	slices.SortFunc(entries, func(a, b broker.ConfigEntry) int { return strings.Compare(a.Name, b.Name) })
	return entries
}

// brokerConfigSource: a broker setting is its default or was set at
// start-up (Wharf has no dynamic broker configs).
func brokerConfigSource(e broker.ConfigEntry) kmsg.ConfigSource {
	if e.IsDefault {
		return kmsg.ConfigSourceDefaultConfig
	}
	return kmsg.ConfigSourceStaticBrokerConfig
}

// brokerConfigTypes are the types of broker configs (DescribeConfigs v3+);
// others are reported as strings.
var brokerConfigTypes = map[string]kmsg.ConfigType{
	"advertised.listeners":                    kmsg.ConfigTypeString,
	"auto.create.topics.enable":               kmsg.ConfigTypeBoolean,
	"auto.leader.rebalance.enable":            kmsg.ConfigTypeBoolean,
	"broker.id":                               kmsg.ConfigTypeInt,
	"leader.imbalance.check.interval.seconds": kmsg.ConfigTypeLong,
	"log.dirs":                                kmsg.ConfigTypeString,
	"log.flush.interval.ms":                   kmsg.ConfigTypeLong,
	"log.retention.bytes":                     kmsg.ConfigTypeLong,
	"log.retention.check.interval.ms":         kmsg.ConfigTypeLong,
	"log.retention.ms":                        kmsg.ConfigTypeLong,
	"log.segment.bytes":                       kmsg.ConfigTypeInt,
	"message.max.bytes":                       kmsg.ConfigTypeInt,
	"min.insync.replicas":                     kmsg.ConfigTypeInt,
	"node.id":                                 kmsg.ConfigTypeInt,
	"num.partitions":                          kmsg.ConfigTypeInt,
	"socket.request.max.bytes":                kmsg.ConfigTypeInt,
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
