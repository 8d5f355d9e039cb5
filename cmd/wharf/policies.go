package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
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
		{"list", "[--vhost /]", "list a vhost's policies", definePoliciesList},
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
	fs := newFlagSet("policies "+c.name, c.usage, strings.ToUpper(c.summary[:1])+c.summary[1:]+".", std.err)
	server := fs.String("http-server", "localhost:15672", "management API address, host:port or a URL")
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

func definePoliciesSet(fs *flag.FlagSet) func(context.Context, *mgmtClient, []string, io.Writer) error {
	vhost := addVHostFlag(fs)
	priority := fs.Int("priority", 0, "priority: of the policies matching an object the highest applies")
	applyTo := fs.String("apply-to", "all", "queues, classic_queues, quorum_queues, streams, exchanges or all")
	return func(ctx context.Context, api *mgmtClient, args []string, out io.Writer) error {
		if len(args) != 3 {
			return usagef("policies set needs NAME PATTERN DEFINITION_JSON")
		}
		var def map[string]any
		dec := json.NewDecoder(strings.NewReader(args[2]))
		dec.UseNumber()
		if err := dec.Decode(&def); err != nil {
			return usagef("DEFINITION_JSON is not a JSON object: %v", err)
		}
		body := map[string]any{"pattern": args[1], "definition": def, "priority": *priority, "apply-to": *applyTo}
		if err := api.do(ctx, http.MethodPut, policyPath(*vhost, args[0]), body, nil); err != nil {
			return err
		}
		fmt.Fprintf(out, "Setting policy %q for pattern %q to %q with priority %q for vhost %q ...\n",
			args[0], args[1], args[2], fmt.Sprint(*priority), *vhost)
		return nil
	}
}

func definePoliciesList(fs *flag.FlagSet) func(context.Context, *mgmtClient, []string, io.Writer) error {
	vhost := addVHostFlag(fs)
	return func(ctx context.Context, api *mgmtClient, args []string, out io.Writer) error {
		if len(args) != 0 {
			return usagef("policies list takes no arguments")
		}
		var ps []struct {
			VHost      string          `json:"vhost"`
			Name       string          `json:"name"`
			Pattern    string          `json:"pattern"`
			ApplyTo    string          `json:"apply-to"`
			Definition json.RawMessage `json:"definition"`
			Priority   int             `json:"priority"`
		}
		if err := api.do(ctx, http.MethodGet, "/api/policies/"+url.PathEscape(*vhost), nil, &ps); err != nil {
			return err
		}
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "vhost\tname\tpattern\tapply-to\tdefinition\tpriority")
		for _, p := range ps {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\n", p.VHost, p.Name, p.Pattern, p.ApplyTo, p.Definition, p.Priority)
		}
		return tw.Flush()
	}
}

func definePoliciesClear(fs *flag.FlagSet) func(context.Context, *mgmtClient, []string, io.Writer) error {
	vhost := addVHostFlag(fs)
	return func(ctx context.Context, api *mgmtClient, args []string, out io.Writer) error {
		if len(args) != 1 {
			return usagef("policies clear needs NAME")
		}
		if err := api.do(ctx, http.MethodDelete, policyPath(*vhost, args[0]), nil, nil); err != nil {
			return err
		}
		fmt.Fprintf(out, "Clearing policy %q on vhost %q ...\n", args[0], *vhost)
		return nil
	}
}

func policyPath(vhost, name string) string {
	return "/api/policies/" + url.PathEscape(vhost) + "/" + url.PathEscape(name)
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

// do sends body (JSON, if not nil) and decodes a 2xx answer into out (if
// not nil); any other answer is an error carrying the API's reason.
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
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var e struct{ Error, Reason string }
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			return fmt.Errorf("%s %s: %d %s: %s", method, path, resp.StatusCode, e.Error, strings.TrimSpace(e.Reason))
		}
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}
