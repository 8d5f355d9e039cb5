package main

import (
	"context"
	"encoding/json"
	"flag"
	"net/url"
	"strings"
)

// The commands over the HTTP management API — queues, exchanges,
// bindings, connections, definitions — share this: a group of
// subcommands, each with --http-server, --user and --password (as `wharf
// policies`) beside its own flags.

// apiCommand is one `wharf GROUP NAME` subcommand over the management
// API. define adds the command's flags and returns what runs it.
type apiCommand struct {
	name, usage, summary string
	define               func(fs *flag.FlagSet) func(ctx context.Context, api *mgmtClient, args []string, std stdio) error
}

// runAPIGroup runs `wharf group ...`: the subcommand args[0] names.
func runAPIGroup(ctx context.Context, group string, cmds []apiCommand, args []string, std stdio) error {
	help := make([]subcommandHelp, len(cmds))
	for i, c := range cmds {
		help[i] = subcommandHelp{c.name, c.summary}
	}
	i, err := selectSubcommand(group, help, args, std)
	if i < 0 {
		return err
	}
	c := cmds[i]
	fs := newFlagSet(group+" "+c.name, c.usage, strings.ToUpper(c.summary[:1])+c.summary[1:]+".", std.out)
	server := fs.String("http-server", "localhost"+defaultHTTPAddr, "management API address, host:port or a URL")
	user := fs.String("user", "guest", "user name")
	password := fs.String("password", "guest", "password")
	env := bindEnv(fs, "http-server", "user", "password")
	run := c.define(fs)
	positional, err := parseArgs(fs, args[1:], env)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	return run(ctx, newMgmtClient(*server, *user, *password), positional, std)
}

// apiPath joins escaped path segments below /api/: the vhost "/" becomes
// "%2F", as the API wants.
func apiPath(segments ...string) string {
	var b strings.Builder
	b.WriteString("/api")
	for _, s := range segments {
		b.WriteString("/" + url.PathEscape(s))
	}
	return b.String()
}

// compactJSON shows a JSON value on one line ("{}" for none).
func compactJSON(v any) string {
	if v == nil {
		return "{}"
	}
	b, _ := json.Marshal(v)
	return string(b)
}
