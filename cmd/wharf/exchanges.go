package main

import (
	"context"
	"flag"
	"net/http"
)

func exchangesCommands() []apiCommand {
	return []apiCommand{
		{"list", "[--vhost /]", "list a vhost's exchanges", defineExchangesList},
	}
}

func runExchanges(ctx context.Context, args []string, std stdio) error {
	return runAPIGroup(ctx, "exchanges", exchangesCommands(), args, std)
}

func defineExchangesList(fs *flag.FlagSet) func(context.Context, *mgmtClient, []string, stdio) error {
	vhost := addVHostFlag(fs)
	return func(ctx context.Context, api *mgmtClient, args []string, std stdio) error {
		if err := expectArgs(args, 0, ""); err != nil {
			return err
		}
		var xs []struct {
			Name       string         `json:"name"`
			Type       string         `json:"type"`
			Durable    bool           `json:"durable"`
			AutoDelete bool           `json:"auto_delete"`
			Internal   bool           `json:"internal"`
			Arguments  map[string]any `json:"arguments"`
		}
		if err := api.do(ctx, http.MethodGet, apiPath("exchanges", *vhost), nil, &xs); err != nil {
			return err
		}
		t := newTable(std.out, "NAME", "TYPE", "DURABLE", "AUTO_DELETE", "INTERNAL", "ARGUMENTS")
		for _, x := range xs {
			t.row(exchangeLabel(x.Name), x.Type, x.Durable, x.AutoDelete, x.Internal, compactJSON(x.Arguments))
		}
		return t.flush()
	}
}

// exchangeLabel names an exchange in a table: the default exchange's
// name is empty.
func exchangeLabel(name string) string {
	if name == "" {
		return "(default)"
	}
	return name
}
