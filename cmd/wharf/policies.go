package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// policiesCommand is one `wharf policies NAME` subcommand; it talks to
// the management API (as rabbitmqctl's set_policy, list_policies and
// clear_policy do to a RabbitMQ node).
type policiesCommand struct {
	name, usage, summary string
	define               func(fs *flag.FlagSet) func(ctx context.Context, api *mgmtClient, args []string, out io.Writer) error
}

func policiesCommands() []policiesCommand {
	return []policiesCommand{
		{"set", "NAME PATTERN DEFINITION_JSON [--priority N] [--apply-to queues] [--vhost /]", "create or replace a policy", definePoliciesSet},
		{"list", "[--vhost /] [--output json]", "list a vhost's policies", definePoliciesList},
		{"clear", "NAME [--vhost /]", "delete a policy", definePoliciesClear},
	}
}

func runPolicies(ctx context.Context, args []string, std stdio) error {
	cmds := policiesCommands()
	help := make([]subcommandHelp, len(cmds))
	for i, c := range cmds {
		help[i] = subcommandHelp{c.name, c.summary}
	}
	i, err := selectSubcommand("policies", help, args, std)
	if i < 0 {
		return err
	}
	return runPoliciesCommand(ctx, cmds[i], args[1:], std)
}

func runPoliciesCommand(ctx context.Context, c policiesCommand, args []string, std stdio) error {
	fs := newFlagSet("policies "+c.name, c.usage, strings.ToUpper(c.summary[:1])+c.summary[1:]+".", std.out)
	server := fs.String("http-server", "localhost"+defaultHTTPAddr, "management API address, host:port or a URL")
	user := fs.String("user", "guest", "user name")
	password := fs.String("password", "guest", "password")
	env := bindEnv(fs, "http-server", "user", "password")
	run := c.define(fs)
	positional, err := parseArgs(fs, args, env)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	return run(ctx, newMgmtClient(*server, *user, *password), positional, std.out)
}

func addVHostFlag(fs *flag.FlagSet) *string {
	return fs.String("vhost", "/", "virtual host")
}

// storedPolicy is a policy as the API returns it.
type storedPolicy struct {
	VHost      string          `json:"vhost"`
	Name       string          `json:"name"`
	Pattern    string          `json:"pattern"`
	ApplyTo    string          `json:"apply-to"`
	Definition json.RawMessage `json:"definition"`
	Priority   int             `json:"priority"`
}

func definePoliciesSet(fs *flag.FlagSet) func(context.Context, *mgmtClient, []string, io.Writer) error {
	vhost := addVHostFlag(fs)
	priority := fs.Int("priority", 0, "priority: of the policies matching an object the highest applies")
	applyTo := fs.String("apply-to", "all", "queues, classic_queues, quorum_queues, streams, exchanges or all")
	return func(ctx context.Context, api *mgmtClient, args []string, out io.Writer) error {
		if len(args) != 3 {
			return usagef("policies set needs NAME PATTERN DEFINITION_JSON")
		}
		name := args[0]
		var def map[string]any
		dec := json.NewDecoder(strings.NewReader(args[2]))
		dec.UseNumber()
		if err := dec.Decode(&def); err != nil {
			return usagef("DEFINITION_JSON is not a JSON object: %v", err)
		}
		body := map[string]any{"pattern": args[1], "definition": def, "priority": *priority, "apply-to": *applyTo}
		if err := api.do(ctx, http.MethodPut, policyPath(*vhost, name), body, nil); err != nil {
			return api.policyError(ctx, "set", *vhost, name, err)
		}
		// Echo what the broker stored, which is what applies.
		var p storedPolicy
		if err := api.do(ctx, http.MethodGet, policyPath(*vhost, name), nil, &p); err != nil {
			return api.policyError(ctx, "read back", *vhost, name, err)
		}
		// Quoted as rabbitmqctl quotes, without escaping: a pattern's
		// backslashes are the pattern's.
		_, err := fmt.Fprintf(out, "Set policy \"%s\" for pattern \"%s\" to %s with priority %d, apply-to %s, on vhost \"%s\"\n",
			p.Name, p.Pattern, p.Definition, p.Priority, p.ApplyTo, p.VHost)
		return err
	}
}

func definePoliciesList(fs *flag.FlagSet) func(context.Context, *mgmtClient, []string, io.Writer) error {
	vhost := addVHostFlag(fs)
	output := addOutputFlag(fs)
	return func(ctx context.Context, api *mgmtClient, args []string, out io.Writer) error {
		if len(args) != 0 {
			return usagef("policies list takes no arguments")
		}
		ps := []storedPolicy{}
		if err := api.do(ctx, http.MethodGet, "/api/policies/"+url.PathEscape(*vhost), nil, &ps); err != nil {
			return api.policyError(ctx, "list", *vhost, "", err)
		}
		if *output == outputJSON {
			return writeJSON(out, ps)
		}
		tw := newTable(out, "VHOST", "NAME", "PATTERN", "APPLY-TO", "DEFINITION", "PRIORITY")
		for _, p := range ps {
			tw.row(p.VHost, p.Name, p.Pattern, p.ApplyTo, string(p.Definition), p.Priority)
		}
		return tw.flush()
	}
}

func definePoliciesClear(fs *flag.FlagSet) func(context.Context, *mgmtClient, []string, io.Writer) error {
	vhost := addVHostFlag(fs)
	return func(ctx context.Context, api *mgmtClient, args []string, out io.Writer) error {
		if len(args) != 1 {
			return usagef("policies clear needs NAME")
		}
		if err := api.do(ctx, http.MethodDelete, policyPath(*vhost, args[0]), nil, nil); err != nil {
			return api.policyError(ctx, "clear", *vhost, args[0], err)
		}
		_, err := fmt.Fprintf(out, "Cleared policy \"%s\" on vhost \"%s\"\n", args[0], *vhost)
		return err
	}
}

func policyPath(vhost, name string) string {
	return "/api/policies/" + url.PathEscape(vhost) + "/" + url.PathEscape(name)
}

// policyError says in plain words why a policy operation failed: a 404
// is a missing vhost or a missing policy, told apart by the vhost list.
func (c *mgmtClient) policyError(ctx context.Context, verb, vhost, name string, err error) error {
	what := "policies"
	if name != "" {
		what = fmt.Sprintf("policy \"%s\"", name)
	}
	var apiErr *apiError
	if !errors.As(err, &apiErr) || apiErr.status != http.StatusNotFound {
		return fmt.Errorf("%s %s: %w", verb, what, err)
	}
	var vhosts []struct{ Name string }
	if c.do(ctx, http.MethodGet, "/api/vhosts", nil, &vhosts) == nil &&
		!slices.ContainsFunc(vhosts, func(v struct{ Name string }) bool { return v.Name == vhost }) {
		return fmt.Errorf("no vhost %s", vhost)
	}
	if name != "" {
		return fmt.Errorf("no policy \"%s\" on vhost \"%s\"", name, vhost)
	}
	return fmt.Errorf("%s %s: %w", verb, what, err)
}

// explainHTTPFailure replaces the error of a request that got no HTTP
// answer by what is at the address, when it is not an HTTP server: a
// Kafka port just closes the connection ("EOF").
func explainHTTPFailure(ctx context.Context, u *url.URL, err error) error {
	if u.Scheme != "http" || ctx.Err() != nil {
		return err
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	if problem := checkPeer(ctx, addr, httpService); problem != nil {
		return problem
	}
	return err
}

// mgmtClient calls the management API with basic auth.
type mgmtClient struct {
	base, user, password string
}

func newMgmtClient(server, user, password string) *mgmtClient {
	base := strings.TrimSuffix(server, "/")
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	return &mgmtClient{base: base, user: user, password: password}
}

// apiError is an answer of the API other than 2xx, with RabbitMQ's error
// body.
type apiError struct {
	status       int
	kind, reason string
}

// Error is the reason in one line: RabbitMQ's "Validation failed\n\nX\n"
// becomes "Validation failed: X".
func (e *apiError) Error() string {
	var parts []string
	for _, line := range strings.Split(e.reason, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			parts = append(parts, line)
		}
	}
	if len(parts) == 0 {
		return fmt.Sprintf("%d %s", e.status, cmp.Or(e.kind, http.StatusText(e.status)))
	}
	return strings.Join(parts, ": ")
}

// do sends body (JSON, if not nil) and decodes a 2xx answer into out (if
// not nil); any other answer is an *apiError. When the request gets no
// HTTP answer at all, the error says what is at the address instead.
func (c *mgmtClient) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	// Opaque keeps "%2F" as it is: URL.Path would turn it into "/".
	req, err := http.NewRequestWithContext(ctx, method, c.base, rd)
	if err != nil {
		return err
	}
	req.URL.Opaque = "//" + req.URL.Host + path
	req.SetBasicAuth(c.user, c.password)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return explainHTTPFailure(ctx, req.URL, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var e struct{ Error, Reason string }
		json.Unmarshal(data, &e)
		return &apiError{status: resp.StatusCode, kind: e.Error, reason: e.Reason}
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}
