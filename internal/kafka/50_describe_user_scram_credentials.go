package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wharf-mq/wharf/internal/users"
)

// DescribeUserScramCredentials (key 50), v0.
//
// Lists the SCRAM mechanisms and iteration counts of the users asked for
// (null or empty: every user with a SCRAM credential), never a salt or a
// key. A user asked for twice is DUPLICATE_RESOURCE, one without a
// credential RESOURCE_NOT_FOUND, with Kafka's messages. It needs DESCRIBE
// on the cluster (else CLUSTER_AUTHORIZATION_FAILED).

// scramMechanismTypes are the mechanisms' numbers in the SCRAM credential
// APIs.
var scramMechanismTypes = map[int8]users.Mechanism{1: users.ScramSHA256, 2: users.ScramSHA512}

func scramMechanismType(m users.Mechanism) int8 {
	for t, mm := range scramMechanismTypes {
		if mm == m {
			return t
		}
	}
	return 0
}

func (s *Server) handleDescribeUserScramCredentials(r *request, req *kmsg.DescribeUserSCRAMCredentialsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if !s.allowedCluster(r, opDescribe) {
		resp.ErrorCode, resp.ErrorMessage = errorCode(errClusterDenied), errorMessage(errClusterDenied)
		return resp, nil
	}
	var names []string
	for _, u := range req.Users {
		names = append(names, u.Name)
	}
	if len(names) == 0 && s.cfg.Users != nil {
		for _, u := range s.cfg.Users.List() {
			if len(u.Credentials) > 0 {
				names = append(names, u.Name)
			}
		}
	}
	seen := map[string]int{}
	for _, name := range names {
		seen[name]++
	}
	// The users this node does not know share one wait for the cluster:
	// on a node cut off from the metadata quorum the first uses it up,
	// and the others are RESOURCE_NOT_FOUND at once.
	ctx, cancel := context.WithTimeout(s.shutdownCtx, s.userLookupWait)
	defer cancel()
	for _, name := range names {
		if seen[name] == 0 {
			continue // answered once already
		}
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = name
		if seen[name] > 1 {
			res.ErrorCode = kerr.DuplicateResource.Code
			res.ErrorMessage = kmsg.StringPtr("Cannot describe SCRAM credentials for the same user twice in a single request: " + name)
			resp.Results = append(resp.Results, res)
			seen[name] = 0
			continue
		}
		seen[name] = 0
		res.CredentialInfos = scramCredentialInfos(ctx, s.cfg.Users, name)
		if len(res.CredentialInfos) == 0 {
			res.ErrorCode = kerr.ResourceNotFound.Code
			res.ErrorMessage = kmsg.StringPtr("Attempt to describe a user credential that does not exist: " + name)
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}

// scramCredentialInfos describes a user's SCRAM credentials, in mechanism
// order; the catch-up of a user the store does not have ends with ctx.
func scramCredentialInfos(ctx context.Context, store *users.Store, name string) []kmsg.DescribeUserSCRAMCredentialsResponseResultCredentialInfo {
	if store == nil {
		return nil
	}
	u, ok := store.GetContext(ctx, name)
	if !ok {
		return nil
	}
	var infos []kmsg.DescribeUserSCRAMCredentialsResponseResultCredentialInfo
	for _, m := range users.Mechanisms {
		if c, has := u.Credentials[m]; has {
			info := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
			info.Mechanism = scramMechanismType(m)
			info.Iterations = int32(c.Iterations)
			infos = append(infos, info)
		}
	}
	return infos
}
