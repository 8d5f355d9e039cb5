// Package acl is Kafka's access control model for Wharf's Kafka listeners:
// ACL bindings (AclBinding) and the filters that select them
// (AclBindingFilter), a Store that keeps them durably in the metadata
// log, and the Authorizer that decides every request's operations from
// them, as Kafka's StandardAuthorizer does:
//
//   - Resources are topics, groups, the cluster ("kafka-cluster") and
//     transactional ids. A binding names its resource literally, "*" for
//     every resource of the type, or by prefix (PREFIXED).
//   - Principals are "User:NAME"; "User:*" is everyone. Hosts are IP
//     addresses; "*" is every host.
//   - A matching DENY beats any ALLOW. An ALLOW for READ, WRITE, DELETE or
//     ALTER also allows DESCRIBE, and ALTER_CONFIGS allows
//     DESCRIBE_CONFIGS; ALL allows and denies everything. A DENY denies
//     only its own operation (or ALL).
//   - Super users may do everything. Otherwise what no binding allows is
//     denied (allow.everyone.if.no.acl.found=false, Kafka's default),
//     unless the authorizer is told to allow resources that have no
//     binding at all.
//
// The enum types are kmsg's, the numbers Kafka puts on the wire.
//
// In a cluster every node's Store follows the metadata log: a binding
// made through any node applies on each as that node applies the log
// (one replication round trip after the write returned, as a Kafka
// broker applies the controller's ACL records), on the node that made it
// before CreateAcls answers.
package acl

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ClusterName is the name of the one CLUSTER resource.
const ClusterName = "kafka-cluster"

// Wildcards, as Kafka writes them.
const (
	WildcardResource  = "*"
	WildcardPrincipal = "User:*"
	WildcardHost      = "*"
)

// Binding is one ACL: Kafka's AclBinding.
type Binding struct {
	ResourceType kmsg.ACLResourceType
	ResourceName string
	PatternType  kmsg.ACLResourcePatternType // LITERAL or PREFIXED
	Principal    string                      // "User:alice", "User:*"
	Host         string                      // an IP address, "*"
	Operation    kmsg.ACLOperation
	Permission   kmsg.ACLPermissionType
}

// String writes the binding as kafka-acls.sh lists one.
func (b Binding) String() string {
	return fmt.Sprintf("(principal=%s, host=%s, operation=%s, permissionType=%s) on %s:%s:%s",
		b.Principal, b.Host, b.Operation, b.Permission, b.ResourceType, b.PatternType, b.ResourceName)
}

// ErrInvalid is a binding or filter Kafka would refuse with
// INVALID_REQUEST; the wrapping error has Kafka's message.
var ErrInvalid = errors.New("invalid ACL")

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Validate checks a binding to be created as Kafka's controller does, and
// refuses the resources Wharf does not have (delegation tokens, users).
func (b Binding) Validate() error {
	switch b.ResourceType {
	case kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeGroup, kmsg.ACLResourceTypeCluster, kmsg.ACLResourceTypeTransactionalId:
	case kmsg.ACLResourceTypeDelegationToken, kmsg.ACLResourceTypeUser:
		return invalidf("resourceType %s is not supported: Wharf has no delegation tokens", b.ResourceType)
	default:
		return invalidf("Invalid resourceType %s", b.ResourceType)
	}
	switch b.PatternType {
	case kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed:
	default:
		return invalidf("Invalid patternType %s", b.PatternType)
	}
	if b.Operation < kmsg.ACLOperationAll || b.Operation > kmsg.ACLOperationDescribeTokens {
		return invalidf("Invalid operation %s", b.Operation)
	}
	switch b.Permission {
	case kmsg.ACLPermissionTypeAllow, kmsg.ACLPermissionTypeDeny:
	default:
		return invalidf("Invalid permissionType %s", b.Permission)
	}
	switch {
	case b.ResourceName == "":
		return invalidf("Resource name should not be empty")
	case b.ResourceType == kmsg.ACLResourceTypeCluster && b.ResourceName != ClusterName:
		return invalidf("The only valid name for the CLUSTER resource is %s", ClusterName)
	case !strings.Contains(b.Principal, ":"):
		return invalidf("Could not parse principal from `%s` (no colon is present separating the principal type from the principal name)", b.Principal)
	}
	if b.Host != WildcardHost {
		if _, err := netip.ParseAddr(b.Host); err != nil {
			return invalidf("Invalid host %q: an IP address or %s", b.Host, WildcardHost)
		}
	}
	return nil
}

// Filter selects bindings: Kafka's AclBindingFilter. A nil name,
// principal or host matches any; the ANY enum values match any.
type Filter struct {
	ResourceType kmsg.ACLResourceType
	ResourceName *string
	// PatternType ANY matches any pattern with the exact name; MATCH
	// matches every binding that applies to the named resource (the
	// literal name, "*", and prefixes of it); LITERAL and PREFIXED only
	// their own kind.
	PatternType kmsg.ACLResourcePatternType
	Principal   *string
	Host        *string
	Operation   kmsg.ACLOperation
	Permission  kmsg.ACLPermissionType
}

// Validate refuses filters with UNKNOWN elements, as Kafka does.
func (f Filter) Validate() error {
	switch {
	case f.ResourceType < kmsg.ACLResourceTypeAny || f.ResourceType > kmsg.ACLResourceTypeUser:
		return invalidf("Invalid resourceType %s", f.ResourceType)
	case f.PatternType < kmsg.ACLResourcePatternTypeAny || f.PatternType > kmsg.ACLResourcePatternTypePrefixed:
		return invalidf("Invalid patternType %s", f.PatternType)
	case f.Operation < kmsg.ACLOperationAny || f.Operation > kmsg.ACLOperationDescribeTokens:
		return invalidf("Invalid operation %s", f.Operation)
	case f.Permission < kmsg.ACLPermissionTypeAny || f.Permission > kmsg.ACLPermissionTypeAllow:
		return invalidf("Invalid permissionType %s", f.Permission)
	}
	return nil
}

// Matches reports whether the filter selects b.
func (f Filter) Matches(b Binding) bool {
	if f.ResourceType != kmsg.ACLResourceTypeAny && f.ResourceType != b.ResourceType {
		return false
	}
	if !f.matchesPattern(b) {
		return false
	}
	return (f.Principal == nil || *f.Principal == b.Principal) &&
		(f.Host == nil || *f.Host == b.Host) &&
		(f.Operation == kmsg.ACLOperationAny || f.Operation == b.Operation) &&
		(f.Permission == kmsg.ACLPermissionTypeAny || f.Permission == b.Permission)
}

// matchesPattern is Kafka's ResourcePatternFilter.matches.
func (f Filter) matchesPattern(b Binding) bool {
	switch f.PatternType {
	case kmsg.ACLResourcePatternTypeAny, kmsg.ACLResourcePatternTypeMatch:
	default:
		if f.PatternType != b.PatternType {
			return false
		}
	}
	if f.ResourceName == nil {
		return true
	}
	name := *f.ResourceName
	if f.PatternType != kmsg.ACLResourcePatternTypeMatch {
		return name == b.ResourceName
	}
	return appliesTo(b, name)
}

// appliesTo reports whether b's resource pattern covers the resource
// called name (of b's type).
func appliesTo(b Binding, name string) bool {
	if b.PatternType == kmsg.ACLResourcePatternTypePrefixed {
		return strings.HasPrefix(name, b.ResourceName)
	}
	return b.ResourceName == name || b.ResourceName == WildcardResource
}

// ParseSuperUsers reads Kafka's super.users syntax: principals separated
// by ";", e.g. "User:alice;User:bob".
func ParseSuperUsers(s string) ([]string, error) {
	var out []string
	for p := range strings.SplitSeq(s, ";") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if kind, name, ok := strings.Cut(p, ":"); !ok || kind == "" || name == "" {
			return nil, fmt.Errorf("super user %q: want TYPE:NAME, e.g. User:alice", p)
		}
		out = append(out, p)
	}
	return out, nil
}
