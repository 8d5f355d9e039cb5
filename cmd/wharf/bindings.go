package main

import (
	"context"
	"flag"
	"net/http"
)

func bindingsCommands() []apiCommand {
	return []apiCommand{
		{"list", "[--vhost /]", "list a vhost's bindings, the default exchange's first", defineBindingsList},
	}
}

func runBindings(ctx context.Context, args []string, std stdio) error {
	return runAPIGroup(ctx, "bindings", bindingsCommands(), args, std)
}

func defineBindingsList(fs *flag.FlagSet) func(context.Context, *mgmtClient, []string, stdio) error {
	vhost := addVHostFlag(fs)
	return func(ctx context.Context, api *mgmtClient, args []string, std stdio) error {
		if err := expectArgs(args, 0, ""); err != nil {
			return err
		}
		var bs []struct {
			Source          string         `json:"source"`
			Destination     string         `json:"destination"`
			DestinationType string         `json:"destination_type"`
			RoutingKey      string         `json:"routing_key"`
			Arguments       map[string]any `json:"arguments"`
		}
		if err := api.do(ctx, http.MethodGet, apiPath("bindings", *vhost), nil, &bs); err != nil {
			return err
		}
		t := newTable(std.out, "SOURCE", "DESTINATION", "DESTINATION_TYPE", "ROUTING_KEY", "ARGUMENTS")
		for _, b := range bs {
			t.row(exchangeLabel(b.Source), b.Destination, b.DestinationType, b.RoutingKey, compactJSON(b.Arguments))
		}
		return t.flush()
	}
}
