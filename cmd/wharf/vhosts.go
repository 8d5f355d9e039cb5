package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
)

// `wharf vhosts` creates, lists and deletes virtual hosts through the
// management API, as rabbitmqctl add_vhost, list_vhosts and delete_vhost
// do.

func vhostsCommands() []apiCommand {
	return []apiCommand{
		{"add", "NAME", "create a vhost (the user running this gets every permission in it)", defineVHostsAdd},
		{"list", "[--output json]", "list the vhosts and their messages", defineVHostsList},
		{"delete", "NAME", "delete a vhost with its queues, exchanges, policies and permissions; its connections are closed",
			defineVHostsDelete},
	}
}

func runVHosts(ctx context.Context, args []string, std stdio) error {
	return runAPIGroup(ctx, "vhosts", vhostsCommands(), args, std)
}

func defineVHostsAdd(fs *flag.FlagSet) func(context.Context, *mgmtClient, []string, stdio) error {
	return func(ctx context.Context, api *mgmtClient, args []string, std stdio) error {
		if err := expectArgs(args, 1, "NAME"); err != nil {
			return err
		}
		if err := api.do(ctx, http.MethodPut, apiPath("vhosts", args[0]), map[string]any{}, nil); err != nil {
			return err
		}
		fmt.Fprintf(std.out, "Added vhost %q\n", args[0])
		return nil
	}
}

func defineVHostsList(fs *flag.FlagSet) func(context.Context, *mgmtClient, []string, stdio) error {
	output := addOutputFlag(fs)
	return func(ctx context.Context, api *mgmtClient, args []string, std stdio) error {
		if err := expectArgs(args, 0, ""); err != nil {
			return err
		}
		var vs []struct {
			Name     string `json:"name"`
			Messages int64  `json:"messages"`
		}
		if err := api.do(ctx, http.MethodGet, apiPath("vhosts"), nil, &vs); err != nil {
			return err
		}
		if *output == outputJSON {
			return writeJSON(std.out, vs)
		}
		t := newTable(std.out, "NAME", "MESSAGES")
		for _, v := range vs {
			t.row(v.Name, v.Messages)
		}
		return t.flush()
	}
}

func defineVHostsDelete(fs *flag.FlagSet) func(context.Context, *mgmtClient, []string, stdio) error {
	return func(ctx context.Context, api *mgmtClient, args []string, std stdio) error {
		if err := expectArgs(args, 1, "NAME"); err != nil {
			return err
		}
		if err := api.do(ctx, http.MethodDelete, apiPath("vhosts", args[0]), nil, nil); err != nil {
			return notFoundAs(err, "no vhost %s", args[0])
		}
		fmt.Fprintf(std.out, "Deleted vhost %q\n", args[0])
		return nil
	}
}

// notFoundAs replaces an API's 404 by a plain sentence.
func notFoundAs(err error, format string, args ...any) error {
	var apiErr *apiError
	if errors.As(err, &apiErr) && apiErr.status == http.StatusNotFound {
		return fmt.Errorf(format, args...)
	}
	return err
}
