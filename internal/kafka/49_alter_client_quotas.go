package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/quota"
)

// AlterClientQuotas (key 49), v0-v1.
//
// Sets or removes quotas of user, client-id and user+client-id entities,
// a null name being <default>; keys are producer_byte_rate and
// consumer_byte_rate (whole numbers) and request_percentage. Each entry is
// answered on its own and durable (the metadata log) once answered;
// ValidateOnly only checks. What Kafka refuses is INVALID_REQUEST with its
// messages; ip entities and controller_mutation_rate are refused too,
// since Wharf does not enforce them. It needs ALTER_CONFIGS on the cluster
// (else CLUSTER_AUTHORIZATION_FAILED).

func (s *Server) handleAlterClientQuotas(r *request, req *kmsg.AlterClientQuotasRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	allowed := s.allowedCluster(r, opAlterConfigs)
	for _, entry := range req.Entries {
		re := kmsg.NewAlterClientQuotasResponseEntry()
		for _, e := range entry.Entity {
			ee := kmsg.NewAlterClientQuotasResponseEntryEntity()
			ee.Type, ee.Name = e.Type, e.Name
			re.Entity = append(re.Entity, ee)
		}
		err := errClusterDenied
		if allowed {
			err = quotaError(s.alterClientQuotas(entry, req.ValidateOnly))
		}
		re.ErrorCode, re.ErrorMessage = errorCode(err), errorMessage(err)
		resp.Entries = append(resp.Entries, re)
	}
	return resp, nil
}

func (s *Server) alterClientQuotas(entry kmsg.AlterClientQuotasRequestEntry, validateOnly bool) error {
	var pairs []quota.EntityPair
	for _, e := range entry.Entity {
		pairs = append(pairs, quota.EntityPair{Type: e.Type, Name: e.Name})
	}
	entity, err := quota.ParseEntity(pairs)
	if err != nil {
		return err
	}
	set := map[string]float64{}
	var remove []string
	for _, op := range entry.Ops {
		if op.Remove {
			remove = append(remove, op.Key)
		} else {
			set[op.Key] = op.Value
		}
	}
	if s.cfg.Quotas == nil {
		return kafkaErrorf(kerr.InvalidRequest, "this server keeps no client quotas")
	}
	if err := s.cfg.Quotas.Alter(entity, set, remove, validateOnly); err != nil {
		return err
	}
	if !validateOnly {
		s.log.Info("client quotas altered", "entity", entity.String(), "set", set, "removed", remove)
	}
	return nil
}
