package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// `wharf users` manages the node's users through the management API, as
// rabbitmqctl add_user, list_users, delete_user, change_password and
// set_user_tags do. A password is read from stdin unless given as an
// argument, so it need not show in the process list or a shell history.

func usersCommands() []apiCommand {
	return []apiCommand{
		{"add", "NAME [PASSWORD] [--tags administrator,management] [--no-password]",
			"create a user (the password from stdin's first line if not given)", defineUsersAdd},
		{"list", "[--output json]", "list the users and their tags", defineUsersList},
		{"delete", "NAME", "delete a user, its permissions and its connections", defineUsersDelete},
		{"passwd", "NAME [PASSWORD]", "change a user's password (from stdin's first line if not given)", defineUsersPasswd},
		{"set-tags", "NAME [TAG...]", "replace a user's tags (none: it may not use the management API)", defineUsersSetTags},
	}
}

func runUsers(ctx context.Context, args []string, std stdio) error {
	return runAPIGroup(ctx, "users", usersCommands(), args, std)
}

// apiUser is a user as the API shows it.
type apiUser struct {
	Name             string   `json:"name"`
	PasswordHash     string   `json:"password_hash"`
	HashingAlgorithm string   `json:"hashing_algorithm"`
	Tags             []string `json:"tags"`
}

// newPassword is args[1], or the first line of stdin.
func newPassword(args []string, in io.Reader) (string, error) {
	if len(args) == 2 {
		return args[1], nil
	}
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && err != io.EOF {
		return "", err
	}
	password := strings.TrimRight(line, "\r\n")
	if password == "" {
		return "", usagef("no password: give it as an argument or on stdin")
	}
	return password, nil
}

// splitTags reads --tags: comma-separated, as rabbitmqadmin takes them.
func splitTags(list string) []string {
	tags := []string{}
	for t := range strings.SplitSeq(list, ",") {
		if t = strings.TrimSpace(t); t != "" {
			tags = append(tags, t)
		}
	}
	return tags
}

func defineUsersAdd(fs *flag.FlagSet) func(context.Context, *mgmtClient, []string, stdio) error {
	tags := fs.String("tags", "", "comma-separated tags: administrator, monitoring, policymaker, management")
	noPassword := fs.Bool("no-password", false, "a user that logs in only with a TLS client certificate (AMQP EXTERNAL)")
	return func(ctx context.Context, api *mgmtClient, args []string, std stdio) error {
		if len(args) < 1 || len(args) > 2 {
			return usagef("users add needs NAME and, unless --no-password, a PASSWORD or one on stdin")
		}
		body := map[string]any{"tags": splitTags(*tags)}
		if !*noPassword {
			password, err := newPassword(args, std.in)
			if err != nil {
				return err
			}
			body["password"] = password
		} else if len(args) == 2 {
			return usagef("--no-password and a PASSWORD exclude each other")
		}
		if err := api.do(ctx, http.MethodPut, apiPath("users", args[0]), body, nil); err != nil {
			return err
		}
		fmt.Fprintf(std.out, "Added user %q\n", args[0])
		return nil
	}
}

func defineUsersList(fs *flag.FlagSet) func(context.Context, *mgmtClient, []string, stdio) error {
	output := addOutputFlag(fs)
	return func(ctx context.Context, api *mgmtClient, args []string, std stdio) error {
		if err := expectArgs(args, 0, ""); err != nil {
			return err
		}
		var us []apiUser
		if err := api.do(ctx, http.MethodGet, apiPath("users"), nil, &us); err != nil {
			return err
		}
		if *output == outputJSON {
			return writeJSON(std.out, us)
		}
		t := newTable(std.out, "NAME", "TAGS", "PASSWORD")
		for _, u := range us {
			password := "set"
			if u.PasswordHash == "" {
				password = "none (TLS certificate only)"
			}
			t.row(u.Name, orDash(strings.Join(u.Tags, ",")), password)
		}
		return t.flush()
	}
}

func defineUsersDelete(fs *flag.FlagSet) func(context.Context, *mgmtClient, []string, stdio) error {
	return func(ctx context.Context, api *mgmtClient, args []string, std stdio) error {
		if err := expectArgs(args, 1, "NAME"); err != nil {
			return err
		}
		if err := api.do(ctx, http.MethodDelete, apiPath("users", args[0]), nil, nil); err != nil {
			return notFoundAs(err, "no user %q", args[0])
		}
		fmt.Fprintf(std.out, "Deleted user %q\n", args[0])
		return nil
	}
}

func defineUsersPasswd(fs *flag.FlagSet) func(context.Context, *mgmtClient, []string, stdio) error {
	return func(ctx context.Context, api *mgmtClient, args []string, std stdio) error {
		if len(args) < 1 || len(args) > 2 {
			return usagef("users passwd needs NAME and a PASSWORD or one on stdin")
		}
		u, err := api.getUser(ctx, args[0])
		if err != nil {
			return err
		}
		password, err := newPassword(args, std.in)
		if err != nil {
			return err
		}
		if err := api.do(ctx, http.MethodPut, apiPath("users", u.Name), map[string]any{"password": password, "tags": u.Tags}, nil); err != nil {
			return err
		}
		fmt.Fprintf(std.out, "Changed the password of user %q\n", u.Name)
		return nil
	}
}

func defineUsersSetTags(fs *flag.FlagSet) func(context.Context, *mgmtClient, []string, stdio) error {
	return func(ctx context.Context, api *mgmtClient, args []string, std stdio) error {
		if len(args) < 1 {
			return usagef("users set-tags needs NAME")
		}
		u, err := api.getUser(ctx, args[0])
		if err != nil {
			return err
		}
		// The user's own hash goes back with the tags: a PUT without a
		// password or hash would leave the user without a password.
		body := map[string]any{"password_hash": u.PasswordHash, "hashing_algorithm": u.HashingAlgorithm, "tags": args[1:]}
		if err := api.do(ctx, http.MethodPut, apiPath("users", u.Name), body, nil); err != nil {
			return err
		}
		fmt.Fprintf(std.out, "Set the tags of user %q to [%s]\n", u.Name, strings.Join(args[1:], ", "))
		return nil
	}
}

// getUser reads one user, failing with "no user" when it does not exist.
func (c *mgmtClient) getUser(ctx context.Context, name string) (apiUser, error) {
	var u apiUser
	if err := c.do(ctx, http.MethodGet, apiPath("users", name), nil, &u); err != nil {
		return u, notFoundAs(err, "no user %q", name)
	}
	return u, nil
}
