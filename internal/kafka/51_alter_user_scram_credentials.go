package kafka

import (
	"errors"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/users"
)

// AlterUserScramCredentials (key 51), v0.
//
// Sets (from the salted password the client computed, as Kafka takes it)
// or deletes one SCRAM mechanism's credential per entry, creating the user
// when missing. Validated as Kafka's controller validates: a user named
// twice in one request (even for two mechanisms) is DUPLICATE_RESOURCE,
// an empty name or iterations outside 4096-16384 UNACCEPTABLE_CREDENTIAL,
// an unknown mechanism UNSUPPORTED_SASL_MECHANISM, deleting a credential
// that does not exist RESOURCE_NOT_FOUND. Each entry is durable once its
// result is written; entries are not applied as one. It needs ALTER on the
// cluster (else every user is CLUSTER_AUTHORIZATION_FAILED).

func (s *Server) handleAlterUserScramCredentials(r *request, req *kmsg.AlterUserSCRAMCredentialsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	result := func(name string, err error) {
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User = name
		res.ErrorCode, res.ErrorMessage = errorCode(err), errorMessage(err)
		resp.Results = append(resp.Results, res)
	}
	mentions := map[string]int{}
	for _, d := range req.Deletions {
		mentions[d.Name]++
	}
	for _, u := range req.Upsertions {
		mentions[u.Name]++
	}
	if !s.allowedCluster(r, opAlter) {
		for _, name := range slices.Sorted(maps.Keys(mentions)) {
			result(name, errClusterDenied)
		}
		return resp, nil
	}
	duplicate := func(name string) bool {
		switch mentions[name] {
		case 0: // answered already
			return true
		case 1:
			return false
		}
		mentions[name] = 0
		result(name, kafkaErrorf(kerr.DuplicateResource, "A user credential cannot be altered twice in the same request"))
		return true
	}
	for _, d := range req.Deletions {
		if duplicate(d.Name) {
			continue
		}
		m, err := checkScramEntry(d.Name, d.Mechanism)
		if err == nil {
			err = s.deleteScramCredential(d.Name, m)
		}
		result(d.Name, err)
	}
	for _, u := range req.Upsertions {
		if duplicate(u.Name) {
			continue
		}
		m, err := checkScramEntry(u.Name, u.Mechanism)
		switch {
		case err != nil:
		case u.Iterations < users.MinIterations:
			err = kafkaErrorf(kerr.UnacceptableCredential, "Too few iterations")
		case u.Iterations > users.MaxIterations:
			err = kafkaErrorf(kerr.UnacceptableCredential, "Too many iterations")
		case s.cfg.Users == nil:
			err = kafkaErrorf(kerr.UnknownServerError, "no user store")
		default:
			err = s.cfg.Users.SetCredential(u.Name, m, u.Salt, u.SaltedPassword, int(u.Iterations))
			if errors.Is(err, users.ErrInvalidName) {
				err = kafkaErrorf(kerr.UnacceptableCredential, "%v", err)
			}
		}
		result(u.Name, err)
	}
	return resp, nil
}

// checkScramEntry checks what a deletion and an upsertion share: a name
// and a known mechanism.
func checkScramEntry(name string, mechanism int8) (users.Mechanism, error) {
	if name == "" {
		return "", kafkaErrorf(kerr.UnacceptableCredential, "Username must not be empty")
	}
	m, ok := scramMechanismTypes[mechanism]
	if !ok {
		return "", kafkaErrorf(kerr.UnsupportedSaslMechanism, "Unknown SCRAM mechanism")
	}
	return m, nil
}

func (s *Server) deleteScramCredential(name string, m users.Mechanism) error {
	if s.cfg.Users == nil {
		return kafkaErrorf(kerr.ResourceNotFound, "Attempt to delete a user credential that does not exist")
	}
	err := s.cfg.Users.DeleteCredential(name, m)
	if errors.Is(err, users.ErrNoSuchUser) {
		return kafkaErrorf(kerr.ResourceNotFound, "Attempt to delete a user credential that does not exist")
	}
	return err
}
