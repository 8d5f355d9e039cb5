package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
)

func connectionsCommands() []apiCommand {
	return []apiCommand{
		{"list", "", "list the open AMQP connections", defineConnectionsList},
		{"close", "NAME", "close a connection (the client gets 320 CONNECTION_FORCED)", defineConnectionsClose},
	}
}

func runConnections(ctx context.Context, args []string, std stdio) error {
	return runAPIGroup(ctx, "connections", connectionsCommands(), args, std)
}

func defineConnectionsList(fs *flag.FlagSet) func(context.Context, *mgmtClient, []string, stdio) error {
	return func(ctx context.Context, api *mgmtClient, args []string, std stdio) error {
		if err := expectArgs(args, 0, ""); err != nil {
			return err
		}
		var cs []struct {
			Name             string `json:"name"`
			User             string `json:"user"`
			VHost            string `json:"vhost"`
			State            string `json:"state"`
			Channels         int    `json:"channels"`
			ClientProperties struct {
				Product string `json:"product"`
				Version string `json:"version"`
			} `json:"client_properties"`
			UserProvidedName string `json:"user_provided_name"`
		}
		if err := api.do(ctx, http.MethodGet, apiPath("connections"), nil, &cs); err != nil {
			return err
		}
		t := newTable(std.out, "NAME", "CONNECTION_NAME", "USER", "VHOST", "STATE", "CHANNELS", "CLIENT")
		for _, c := range cs {
			t.row(c.Name, c.UserProvidedName, c.User, c.VHost, c.State, c.Channels,
				c.ClientProperties.Product+" "+c.ClientProperties.Version)
		}
		return t.flush()
	}
}

func defineConnectionsClose(fs *flag.FlagSet) func(context.Context, *mgmtClient, []string, stdio) error {
	return func(ctx context.Context, api *mgmtClient, args []string, std stdio) error {
		if err := expectArgs(args, 1, "NAME (as connections list shows it)"); err != nil {
			return err
		}
		if err := api.do(ctx, http.MethodDelete, apiPath("connections", args[0]), nil, nil); err != nil {
			return err
		}
		fmt.Fprintf(std.out, "Closed connection %q\n", args[0])
		return nil
	}
}
