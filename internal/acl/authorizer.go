package acl

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Authorizer decides requests from a Store's bindings, as Kafka's
// StandardAuthorizer does (see the package comment).
type Authorizer struct {
	store      *Store
	superUsers []string
	// allowIfNoACL is Kafka's allow.everyone.if.no.acl.found: a
	// resource no binding applies to is open to everyone.
	allowIfNoACL bool
}

// NewAuthorizer returns an authorizer over store. superUsers are
// principals ("User:alice") that may do everything.
func NewAuthorizer(store *Store, superUsers []string, allowEveryoneIfNoACL bool) *Authorizer {
	return &Authorizer{store: store, superUsers: slices.Clone(superUsers), allowIfNoACL: allowEveryoneIfNoACL}
}

// Store is where the authorizer's bindings live.
func (a *Authorizer) Store() *Store { return a.store }

// Authorize reports whether principal, connected from host, may do op on
// the resource of type rt called name.
func (a *Authorizer) Authorize(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if slices.Contains(a.superUsers, principal) {
		return true
	}
	var bound, denied, allowed bool
	a.store.index.Load().applying(rt, name, func(b Binding) {
		bound = true
		if !b.appliesToClient(principal, host) {
			return
		}
		switch {
		case b.Permission == kmsg.ACLPermissionTypeDeny && (b.Operation == op || b.Operation == kmsg.ACLOperationAll):
			denied = true
		case b.Permission == kmsg.ACLPermissionTypeAllow && allows(b.Operation, op):
			allowed = true
		}
	})
	switch {
	case denied:
		return false
	case allowed:
		return true
	}
	return !bound && a.allowIfNoACL
}

// AuthorizeAny reports whether principal may do op on at least one
// resource of type rt: Kafka's authorizeByResourceType, which
// InitProducerId uses (idempotent producers need WRITE on some topic).
// An ALLOW counts unless a DENY covers every resource it allows.
func (a *Authorizer) AuthorizeAny(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType) bool {
	if slices.Contains(a.superUsers, principal) {
		return true
	}
	var allowing, denying []Binding
	bound := false
	for _, b := range a.store.index.Load().all {
		if b.ResourceType != rt {
			continue
		}
		bound = true
		if !b.appliesToClient(principal, host) {
			continue
		}
		switch {
		case b.Permission == kmsg.ACLPermissionTypeDeny && (b.Operation == op || b.Operation == kmsg.ACLOperationAll):
			denying = append(denying, b)
		case b.Permission == kmsg.ACLPermissionTypeAllow && allows(b.Operation, op):
			allowing = append(allowing, b)
		}
	}
	if !bound {
		return a.allowIfNoACL
	}
	for _, allow := range allowing {
		if !slices.ContainsFunc(denying, func(deny Binding) bool { return covers(deny, allow) }) {
			return true
		}
	}
	return false
}

// covers reports whether every resource allow names is also denied by
// deny.
func covers(deny, allow Binding) bool {
	if deny.PatternType == kmsg.ACLResourcePatternTypePrefixed {
		return strings.HasPrefix(allow.ResourceName, deny.ResourceName)
	}
	if deny.ResourceName == WildcardResource {
		return true
	}
	return allow.PatternType == kmsg.ACLResourcePatternTypeLiteral && allow.ResourceName == deny.ResourceName
}

// appliesToClient reports whether b names the principal (or everyone)
// and the host (or every host).
func (b Binding) appliesToClient(principal, host string) bool {
	return (b.Principal == principal || b.Principal == WildcardPrincipal) &&
		(b.Host == host || b.Host == WildcardHost)
}

// allows reports whether an ALLOW for granted permits op: the same
// operation, ALL, or one that implies op.
func allows(granted, op kmsg.ACLOperation) bool {
	switch {
	case granted == op, granted == kmsg.ACLOperationAll:
		return true
	case op == kmsg.ACLOperationDescribe:
		return granted == kmsg.ACLOperationRead || granted == kmsg.ACLOperationWrite ||
			granted == kmsg.ACLOperationDelete || granted == kmsg.ACLOperationAlter
	case op == kmsg.ACLOperationDescribeConfigs:
		return granted == kmsg.ACLOperationAlterConfigs
	}
	return false
}

// AuthorizedOperations is the KIP-430 bitfield of which of ops the
// principal may do on the resource: bit n for operation n.
func (a *Authorizer) AuthorizedOperations(principal, host string, rt kmsg.ACLResourceType, name string, ops []kmsg.ACLOperation) int32 {
	var bits int32
	for _, op := range ops {
		if a.Authorize(principal, host, op, rt, name) {
			bits |= 1 << op
		}
	}
	return bits
}
