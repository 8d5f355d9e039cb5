package kafka

import (
	"regexp"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ApiVersions (key 18), v0-v5.
//
// A request above v5 never reaches here: the connection answers it with a
// v0 response carrying UNSUPPORTED_VERSION and our version table (see
// unsupportedApiVersionsResponse), and the client retries lower.
//
// v3+ (KIP-511) clients name their software; a name or version that does
// not match Kafka's pattern is INVALID_REQUEST. v5 (KIP-1242) clients may
// say which cluster and node they expect: both or neither must be set, and a
// mismatch is REBOOTSTRAP_REQUIRED.

// clientSoftwarePattern is Kafka's rule for ClientSoftwareName/Version.
var clientSoftwarePattern = regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$`)

func (s *Server) handleApiVersions(req *kmsg.ApiVersionsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = advertisedApiKeys()
	if req.Version >= 3 &&
		(!clientSoftwarePattern.MatchString(req.ClientSoftwareName) ||
			!clientSoftwarePattern.MatchString(req.ClientSoftwareVersion)) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil
	}
	if req.Version >= 5 {
		clusterSet, nodeSet := req.ClusterID != nil, req.NodeID >= 0
		switch {
		case clusterSet != nodeSet:
			resp.ErrorCode = kerr.InvalidRequest.Code
		case clusterSet && (*req.ClusterID != s.broker.ClusterID() || req.NodeID != s.broker.NodeID()):
			resp.ErrorCode = kerr.RebootstrapRequired.Code
		}
	}
	return resp, nil
}

// advertisedApiKeys is the apiVersions table in ApiVersions form, sorted by
// key as Kafka sends it.
func advertisedApiKeys() []kmsg.ApiVersionsResponseApiKey {
	keys := make([]kmsg.ApiVersionsResponseApiKey, 0, len(apiVersions))
	for key, vr := range apiVersions {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = int16(key), vr.min, vr.max
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].ApiKey < keys[j].ApiKey })
	return keys
}

// unsupportedApiVersionsResponse answers an ApiVersions request whose
// version is above ours the way Kafka 2.4+ does: a v0-encoded response with
// UNSUPPORTED_VERSION that still lists our versions, so the client (e.g.
// librdkafka) can retry at a version we speak.
func unsupportedApiVersionsResponse() kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = advertisedApiKeys()
	return resp
}
