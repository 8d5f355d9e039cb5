package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
)

// `wharf permissions` sets, lists and clears users' permissions in a
// vhost through the management API, as rabbitmqctl set_permissions,
// list_permissions and clear_permissions do.

func permissionsCommands() []apiCommand {
	return []apiCommand{
		{"set", "USER CONFIGURE WRITE READ [--vhost /]",
			"give a user permissions in a vhost: regular expressions of the queue and exchange names it may configure, write to and read from",
			definePermissionsSet},
		{"list", "[--vhost /] [--for-user USER] [--output json]", "list the permissions in a vhost, or of a user in every vhost", definePermissionsList},
		{"clear", "USER [--vhost /]", "take a user's permissions in a vhost away (it may no longer use the vhost)", definePermissionsClear},
	}
}

func runPermissions(ctx context.Context, args []string, std stdio) error {
	return runAPIGroup(ctx, "permissions", permissionsCommands(), args, std)
}

// apiPermission is a permission as the API shows it.
type apiPermission struct {
	User      string `json:"user"`
	VHost     string `json:"vhost"`
	Configure string `json:"configure"`
	Write     string `json:"write"`
	Read      string `json:"read"`
}

func definePermissionsSet(fs *flag.FlagSet) func(context.Context, *mgmtClient, []string, stdio) error {
	vhost := addVHostFlag(fs)
	return func(ctx context.Context, api *mgmtClient, args []string, std stdio) error {
		if len(args) != 4 {
			return usagef("permissions set needs USER CONFIGURE WRITE READ (\"\" grants nothing, \".*\" everything)")
		}
		body := map[string]string{"configure": args[1], "write": args[2], "read": args[3]}
		if err := api.do(ctx, http.MethodPut, apiPath("permissions", *vhost, args[0]), body, nil); err != nil {
			return err
		}
		fmt.Fprintf(std.out, "Set permissions of user %q in vhost %q: configure %q, write %q, read %q\n",
			args[0], *vhost, args[1], args[2], args[3])
		return nil
	}
}

func definePermissionsList(fs *flag.FlagSet) func(context.Context, *mgmtClient, []string, stdio) error {
	vhost := addVHostFlag(fs)
	user := fs.String("for-user", "", "list this user's permissions in every vhost instead")
	output := addOutputFlag(fs)
	return func(ctx context.Context, api *mgmtClient, args []string, std stdio) error {
		if err := expectArgs(args, 0, ""); err != nil {
			return err
		}
		path, missing := apiPath("vhosts", *vhost, "permissions"), fmt.Sprintf("no vhost %s", *vhost)
		if *user != "" {
			path, missing = apiPath("users", *user, "permissions"), fmt.Sprintf("no user %q", *user)
		}
		var ps []apiPermission
		if err := api.do(ctx, http.MethodGet, path, nil, &ps); err != nil {
			return notFoundAs(err, "%s", missing)
		}
		if *output == outputJSON {
			return writeJSON(std.out, ps)
		}
		t := newTable(std.out, "USER", "VHOST", "CONFIGURE", "WRITE", "READ")
		for _, p := range ps {
			t.row(p.User, p.VHost, p.Configure, p.Write, p.Read)
		}
		return t.flush()
	}
}

func definePermissionsClear(fs *flag.FlagSet) func(context.Context, *mgmtClient, []string, stdio) error {
	vhost := addVHostFlag(fs)
	return func(ctx context.Context, api *mgmtClient, args []string, std stdio) error {
		if err := expectArgs(args, 1, "USER"); err != nil {
			return err
		}
		if err := api.do(ctx, http.MethodDelete, apiPath("permissions", *vhost, args[0]), nil, nil); err != nil {
			return notFoundAs(err, "user %q has no permissions in vhost %q", args[0], *vhost)
		}
		fmt.Fprintf(std.out, "Cleared the permissions of user %q in vhost %q\n", args[0], *vhost)
		return nil
	}
}
