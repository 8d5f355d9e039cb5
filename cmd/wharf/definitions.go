package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
)

func definitionsCommands() []apiCommand {
	return []apiCommand{
		{"export", "[FILE] [--vhost VHOST]", "write every vhost's (or one vhost's) definitions as JSON, to FILE or stdout",
			defineDefinitionsExport},
		{"import", "FILE [--vhost VHOST]", "create the queues, exchanges, bindings, policies and vhosts a definitions file " +
			"(Wharf's or RabbitMQ's; - for stdin) names", defineDefinitionsImport},
	}
}

func runDefinitions(ctx context.Context, args []string, std stdio) error {
	return runAPIGroup(ctx, "definitions", definitionsCommands(), args, std)
}

// definitionsPath is the export or import endpoint: the whole node's, or
// one vhost's.
func definitionsPath(vhost string) string {
	if vhost == "" {
		return apiPath("definitions")
	}
	return apiPath("definitions", vhost)
}

func defineDefinitionsExport(fs *flag.FlagSet) func(context.Context, *mgmtClient, []string, stdio) error {
	vhost := fs.String("vhost", "", "only this vhost's definitions, without vhost fields (default: every vhost)")
	return func(ctx context.Context, api *mgmtClient, args []string, std stdio) error {
		if len(args) > 1 {
			return usagef("unexpected arguments: %v", args[1:])
		}
		var defs json.RawMessage
		if err := api.do(ctx, http.MethodGet, definitionsPath(*vhost), nil, &defs); err != nil {
			return err
		}
		var pretty bytes.Buffer
		if err := json.Indent(&pretty, defs, "", "  "); err != nil {
			return err
		}
		pretty.WriteByte('\n')
		if len(args) == 0 || args[0] == "-" {
			_, err := std.out.Write(pretty.Bytes())
			return err
		}
		if err := os.WriteFile(args[0], pretty.Bytes(), 0o600); err != nil {
			return err
		}
		fmt.Fprintf(std.out, "Exported definitions to %s\n", args[0])
		return nil
	}
}

func defineDefinitionsImport(fs *flag.FlagSet) func(context.Context, *mgmtClient, []string, stdio) error {
	vhost := fs.String("vhost", "", "import everything into this vhost, whatever the file says (default: the file's vhosts)")
	return func(ctx context.Context, api *mgmtClient, args []string, std stdio) error {
		if err := expectArgs(args, 1, "FILE"); err != nil {
			return err
		}
		var data []byte
		var err error
		if args[0] == "-" {
			data, err = io.ReadAll(std.in)
		} else {
			data, err = os.ReadFile(args[0])
		}
		if err != nil {
			return err
		}
		if !json.Valid(data) {
			return fmt.Errorf("%s is not JSON", args[0])
		}
		if err := api.do(ctx, http.MethodPost, definitionsPath(*vhost), json.RawMessage(data), nil); err != nil {
			return err
		}
		fmt.Fprintf(std.out, "Imported definitions from %s\n", args[0])
		return nil
	}
}
