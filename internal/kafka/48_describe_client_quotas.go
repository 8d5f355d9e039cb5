package kafka

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/quota"
)

// DescribeClientQuotas (key 48), v0-v1.
//
// Lists the quotas of the entities the filter selects: each component
// matches a user or client id exactly (EXACT), as <default> (DEFAULT) or
// any (SPECIFIED); Strict leaves out entities with types the filter does
// not name. Filters Kafka refuses are INVALID_REQUEST with its messages;
// ip filters find nothing (Wharf keeps no ip quotas). It needs
// DESCRIBE_CONFIGS on the cluster (else CLUSTER_AUTHORIZATION_FAILED).

func (s *Server) handleDescribeClientQuotas(r *request, req *kmsg.DescribeClientQuotasRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	described, err := s.describeClientQuotas(r, req)
	if err != nil {
		err = quotaError(err)
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		return resp, nil
	}
	for _, d := range described {
		e := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, p := range entityPairs(d.Entity) {
			ee := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			ee.Type, ee.Name = p.Type, p.Name
			e.Entity = append(e.Entity, ee)
		}
		for _, key := range quota.Keys {
			if v, ok := d.Values[key]; ok {
				ev := kmsg.NewDescribeClientQuotasResponseEntryValue()
				ev.Key, ev.Value = key, v
				e.Values = append(e.Values, ev)
			}
		}
		resp.Entries = append(resp.Entries, e)
	}
	return resp, nil
}

func (s *Server) describeClientQuotas(r *request, req *kmsg.DescribeClientQuotasRequest) ([]quota.Described, error) {
	if !s.allowedCluster(r, opDescribeConfigs) {
		return nil, errClusterDenied
	}
	var parts []quota.FilterPart
	for _, c := range req.Components {
		p := quota.FilterPart{Type: c.EntityType, Match: quota.MatchType(c.MatchType)}
		switch {
		case c.EntityType == "":
			return nil, kafkaErrorf(kerr.InvalidRequest, "Invalid empty entity type.")
		case p.Match == quota.MatchExact && c.Match == nil:
			return nil, kafkaErrorf(kerr.InvalidRequest, "Request specified MATCH_TYPE_EXACT, but set match string to null.")
		case p.Match == quota.MatchDefault && c.Match != nil:
			return nil, kafkaErrorf(kerr.InvalidRequest, "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
		case p.Match == quota.MatchAny && c.Match != nil:
			return nil, kafkaErrorf(kerr.InvalidRequest, "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
		}
		if c.Match != nil {
			p.Name = *c.Match
		}
		parts = append(parts, p)
	}
	if s.cfg.Quotas == nil {
		return nil, nil
	}
	return s.cfg.Quotas.Describe(parts, req.Strict)
}

// entityPairs writes an entity as the quota APIs carry it.
func entityPairs(e quota.Entity) []quota.EntityPair {
	var out []quota.EntityPair
	for _, part := range []struct {
		typ string
		p   quota.Part
	}{{quota.TypeUser, e.User}, {quota.TypeClientID, e.ClientID}} {
		if !part.p.Given {
			continue
		}
		pair := quota.EntityPair{Type: part.typ}
		if !part.p.Default {
			pair.Name = kmsg.StringPtr(part.p.Name)
		}
		out = append(out, pair)
	}
	return out
}

// quotaError is the Kafka error for a refused quota entity, key or filter.
func quotaError(err error) error {
	if errors.Is(err, quota.ErrInvalid) {
		return kafkaErrorf(kerr.InvalidRequest, "%s", err.Error())
	}
	return err
}
