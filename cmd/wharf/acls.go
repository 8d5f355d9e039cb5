package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// `wharf acls add|list|remove` manages Kafka ACLs as kafka-acls.sh does,
// with its flags: --allow-principal, --deny-principal, --allow-host,
// --deny-host, --operation, --topic, --group, --transactional-id,
// --cluster and --resource-pattern-type. The broker must run with
// --kafka-authorizer (without it Kafka's ACL APIs are SECURITY_DISABLED),
// and the user needs ALTER on the cluster to change ACLs, DESCRIBE to
// list them (or be a super user).

type aclsCommand struct {
	name, usage, summary string
	define               func(fs *flag.FlagSet, f *aclFlags) func(env kafkaEnv) error
}

func aclsCommands() []aclsCommand {
	return []aclsCommand{
		{"add", "--allow-principal User:NAME|--deny-principal User:NAME [--operation OP ...] --topic T|--group G|--transactional-id ID|--cluster",
			"add ACLs: each principal may (or may not) do each operation on each resource", defineACLsAdd},
		{"list", "[--topic T|--group G|--transactional-id ID|--cluster] [--principal User:NAME] [--output json]",
			"list ACLs, of the resources given or all", defineACLsList},
		{"remove", "--topic T|--group G|--transactional-id ID|--cluster [--allow-principal/--deny-principal P] [--operation OP]",
			"remove the ACLs of resources, narrowed by principal, host and operation", defineACLsRemove},
	}
}

func runACLs(ctx context.Context, args []string, std stdio) error {
	cmds := aclsCommands()
	help := make([]subcommandHelp, len(cmds))
	for i, c := range cmds {
		help[i] = subcommandHelp{c.name, c.summary}
	}
	i, err := selectSubcommand("acls", help, args, std)
	if i < 0 {
		return err
	}
	c := cmds[i]
	var (
		f   aclFlags
		run func(kafkaEnv) error
	)
	return runKafkaSubcommand(ctx, "acls", c.name, c.usage, c.summary, args[1:], std,
		func(fs *flag.FlagSet) {
			f.define(fs)
			run = c.define(fs, &f)
		},
		func(env kafkaEnv, positional []string) error {
			if err := expectArgs(positional, 0, ""); err != nil {
				return err
			}
			return run(env)
		})
}

// aclFlags are kafka-acls.sh's flags shared by the subcommands.
type aclFlags struct {
	allow, deny, allowHosts, denyHosts stringList
	operations                         stringList
	topics, groups, txnIDs             stringList
	cluster                            bool
	patternType                        string
}

func (f *aclFlags) define(fs *flag.FlagSet) {
	fs.Var(&f.allow, "allow-principal", "principal `User:NAME` the ACL allows (repeatable; User:* is everyone)")
	fs.Var(&f.deny, "deny-principal", "principal `User:NAME` the ACL denies (repeatable); a DENY beats any ALLOW")
	fs.Var(&f.allowHosts, "allow-host", "IP `address` the allowing ACLs apply from (repeatable; default: every host, *)")
	fs.Var(&f.denyHosts, "deny-host", "IP `address` the denying ACLs apply from (repeatable; default: every host, *)")
	fs.Var(&f.operations, "operation", "`operation`: All, Read, Write, Create, Delete, Alter, Describe, ClusterAction, "+
		"DescribeConfigs, AlterConfigs, IdempotentWrite (repeatable; add's default: All)")
	fs.Var(&f.topics, "topic", "topic `name` (repeatable; * for every topic)")
	fs.Var(&f.groups, "group", "consumer group `name` (repeatable; * for every group)")
	fs.Var(&f.txnIDs, "transactional-id", "transactional `id` (repeatable; * for every id)")
	fs.BoolVar(&f.cluster, "cluster", false, "the cluster resource (kafka-cluster)")
	fs.StringVar(&f.patternType, "resource-pattern-type", "literal",
		"literal or prefixed (names are prefixes); list and remove also take match (every ACL that applies to the resources) and any")
}

// aclResource is one resource pattern the flags name.
type aclResource struct {
	typ  kmsg.ACLResourceType
	name string
}

func (f *aclFlags) resources() []aclResource {
	var out []aclResource
	for _, set := range []struct {
		typ   kmsg.ACLResourceType
		names []string
	}{{kmsg.ACLResourceTypeTopic, f.topics}, {kmsg.ACLResourceTypeGroup, f.groups}, {kmsg.ACLResourceTypeTransactionalId, f.txnIDs}} {
		for _, n := range set.names {
			out = append(out, aclResource{set.typ, n})
		}
	}
	if f.cluster {
		out = append(out, aclResource{kmsg.ACLResourceTypeCluster, "kafka-cluster"})
	}
	return out
}

func (f *aclFlags) pattern(filter bool) (kmsg.ACLResourcePatternType, error) {
	pt, err := kmsg.ParseACLResourcePatternType(f.patternType)
	if err == nil && (pt == kmsg.ACLResourcePatternTypeLiteral || pt == kmsg.ACLResourcePatternTypePrefixed ||
		filter && (pt == kmsg.ACLResourcePatternTypeMatch || pt == kmsg.ACLResourcePatternTypeAny)) {
		return pt, nil
	}
	if filter {
		return 0, usagef("--resource-pattern-type %q: want literal, prefixed, match or any", f.patternType)
	}
	return 0, usagef("--resource-pattern-type %q: want literal or prefixed", f.patternType)
}

// ops parses --operation; none gives def.
func (f *aclFlags) ops(def kmsg.ACLOperation) ([]kmsg.ACLOperation, error) {
	if len(f.operations) == 0 {
		return []kmsg.ACLOperation{def}, nil
	}
	var out []kmsg.ACLOperation
	for _, name := range f.operations {
		op, err := kmsg.ParseACLOperation(name)
		if err != nil || op == kmsg.ACLOperationUnknown || op == kmsg.ACLOperationAny {
			return nil, usagef("--operation %q: want All, Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs or IdempotentWrite", name)
		}
		out = append(out, op)
	}
	return out, nil
}

// grant is one principal allowed or denied from some hosts.
type grant struct {
	principal string
	hosts     []string
	perm      kmsg.ACLPermissionType
}

func (f *aclFlags) grants() []grant {
	hostsOr := func(hosts []string) []string {
		if len(hosts) == 0 {
			return []string{"*"}
		}
		return hosts
	}
	var out []grant
	for _, p := range f.allow {
		out = append(out, grant{p, hostsOr(f.allowHosts), kmsg.ACLPermissionTypeAllow})
	}
	for _, p := range f.deny {
		out = append(out, grant{p, hostsOr(f.denyHosts), kmsg.ACLPermissionTypeDeny})
	}
	return out
}

func defineACLsAdd(fs *flag.FlagSet, f *aclFlags) func(kafkaEnv) error {
	return func(env kafkaEnv) error {
		resources, grants := f.resources(), f.grants()
		switch {
		case len(resources) == 0:
			return usagef("name a resource: --topic, --group, --transactional-id or --cluster")
		case len(grants) == 0:
			return usagef("name who: --allow-principal or --deny-principal")
		}
		pt, err := f.pattern(false)
		if err != nil {
			return err
		}
		ops, err := f.ops(kmsg.ACLOperationAll)
		if err != nil {
			return err
		}
		req := kmsg.NewPtrCreateACLsRequest()
		for _, res := range resources {
			for _, g := range grants {
				for _, host := range g.hosts {
					for _, op := range ops {
						c := kmsg.NewCreateACLsRequestCreation()
						c.ResourceType, c.ResourceName, c.ResourcePatternType = res.typ, res.name, pt
						c.Principal, c.Host, c.Operation, c.PermissionType = g.principal, host, op, g.perm
						req.Creations = append(req.Creations, c)
					}
				}
			}
		}
		if err := env.reachable(); err != nil {
			return err
		}
		resp, err := req.RequestWith(env.ctx, env.cl)
		if err != nil {
			return fmt.Errorf("create ACLs: %w", err)
		}
		var errs []error
		for i, r := range resp.Results {
			if err := kafkaErr(r.ErrorCode, r.ErrorMessage); err != nil {
				c := req.Creations[i]
				errs = append(errs, fmt.Errorf("%s: %w", describeBinding(c.ResourceType, c.ResourceName, c.ResourcePatternType,
					c.Principal, c.Host, c.Operation, c.PermissionType), err))
			}
		}
		if len(errs) > 0 {
			return errors.Join(errs...)
		}
		fmt.Fprintf(env.out, "Added %d ACL(s).\n", len(req.Creations))
		return nil
	}
}

func defineACLsList(fs *flag.FlagSet, f *aclFlags) func(kafkaEnv) error {
	principal := fs.String("principal", "", "only the ACLs of this principal `User:NAME`")
	output := addOutputFlag(fs)
	return func(env kafkaEnv) error {
		pt, err := f.pattern(true)
		if err != nil {
			return err
		}
		resources := f.resources()
		var filters []kmsg.DescribeACLsRequest
		if len(resources) == 0 {
			req := kmsg.NewDescribeACLsRequest()
			req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
			filters = append(filters, req)
		}
		for _, res := range resources {
			req := kmsg.NewDescribeACLsRequest()
			req.ResourceType, req.ResourceName, req.ResourcePatternType = res.typ, kmsg.StringPtr(res.name), pt
			filters = append(filters, req)
		}
		if err := env.reachable(); err != nil {
			return err
		}
		listed := []listedACL{}
		for _, req := range filters {
			if *principal != "" {
				req.Principal = principal
			}
			req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
			resp, err := req.RequestWith(env.ctx, env.cl)
			if err == nil {
				err = kafkaErr(resp.ErrorCode, resp.ErrorMessage)
			}
			if err != nil {
				return fmt.Errorf("list ACLs: %w", err)
			}
			for _, r := range resp.Resources {
				for _, a := range r.ACLs {
					listed = append(listed, listedACL{r.ResourceType.String(), r.ResourceName, r.ResourcePatternType.String(),
						a.Principal, a.Host, a.Operation.String(), a.PermissionType.String()})
				}
			}
		}
		if *output == outputJSON {
			return writeJSON(env.out, listed)
		}
		t := newTable(env.out, "RESOURCE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION")
		for _, a := range listed {
			t.row(a.ResourceType, a.Name, a.PatternType, a.Principal, a.Host, a.Operation, a.Permission)
		}
		return t.flush()
	}
}

// listedACL is one ACL of `acls list --output json`.
type listedACL struct {
	ResourceType string `json:"resource_type"`
	Name         string `json:"name"`
	PatternType  string `json:"pattern_type"`
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	Operation    string `json:"operation"`
	Permission   string `json:"permission"`
}

func defineACLsRemove(fs *flag.FlagSet, f *aclFlags) func(kafkaEnv) error {
	return func(env kafkaEnv) error {
		resources := f.resources()
		if len(resources) == 0 {
			return usagef("name a resource: --topic, --group, --transactional-id or --cluster")
		}
		pt, err := f.pattern(true)
		if err != nil {
			return err
		}
		ops, err := f.ops(kmsg.ACLOperationAny)
		if err != nil {
			return err
		}
		// Without a principal, every principal's ACLs go.
		grants := f.grants()
		if len(grants) == 0 {
			grants = []grant{{perm: kmsg.ACLPermissionTypeAny}}
		}
		req := kmsg.NewPtrDeleteACLsRequest()
		for _, res := range resources {
			for _, g := range grants {
				hosts := g.hosts
				if len(f.allowHosts)+len(f.denyHosts) == 0 {
					hosts = []string{""} // any host
				}
				for _, host := range hosts {
					for _, op := range ops {
						filter := kmsg.NewDeleteACLsRequestFilter()
						filter.ResourceType, filter.ResourceName, filter.ResourcePatternType = res.typ, kmsg.StringPtr(res.name), pt
						filter.Operation, filter.PermissionType = op, g.perm
						if g.principal != "" {
							filter.Principal = kmsg.StringPtr(g.principal)
						}
						if host != "" {
							filter.Host = kmsg.StringPtr(host)
						}
						req.Filters = append(req.Filters, filter)
					}
				}
			}
		}
		if err := env.reachable(); err != nil {
			return err
		}
		resp, err := req.RequestWith(env.ctx, env.cl)
		if err != nil {
			return fmt.Errorf("remove ACLs: %w", err)
		}
		removed := 0
		for _, r := range resp.Results {
			if err := kafkaErr(r.ErrorCode, r.ErrorMessage); err != nil {
				return fmt.Errorf("remove ACLs: %w", err)
			}
			for _, m := range r.MatchingACLs {
				fmt.Fprintf(env.out, "Removed %s\n", describeBinding(m.ResourceType, m.ResourceName, m.ResourcePatternType,
					m.Principal, m.Host, m.Operation, m.PermissionType))
				removed++
			}
		}
		if removed == 0 {
			fmt.Fprintln(env.out, "No ACL matched.")
		}
		return nil
	}
}

// describeBinding writes an ACL as kafka-acls.sh does.
func describeBinding(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType,
	principal, host string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) string {
	return fmt.Sprintf("(principal=%s, host=%s, operation=%s, permissionType=%s) on %s:%s:%s",
		principal, host, op, perm, rt, pt, name)
}

// kafkaErr is the error of a response's code and message, nil for none.
func kafkaErr(code int16, message *string) error {
	err := kerr.ErrorForCode(code)
	if err == nil || message == nil || *message == "" {
		return err
	}
	return fmt.Errorf("%w: %s", err, strings.TrimSpace(*message))
}
