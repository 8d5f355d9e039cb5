package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/wharf-mq/wharf/internal/nodetest"
)

// wharfIn runs the CLI in process with stdin, returning its exit status
// and output.
func wharfIn(stdin string, args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(args, stdio{in: strings.NewReader(stdin), out: &out, err: &errOut})
	return code, out.String(), errOut.String()
}

// TestUsersVHostsPermissionsCommands: a user made with `wharf users add`
// (password on stdin), given permissions in a vhost made with `wharf
// vhosts add`, logs in over AMQP; set-tags keeps its password; clearing
// its permissions and deleting the vhost and the user take it all away.
func TestUsersVHostsPermissionsCommands(t *testing.T) {
	n := nodetest.Start(t)
	server := "--http-server=" + n.HTTPAddr()
	must := func(stdin string, args ...string) string {
		t.Helper()
		code, out, errOut := wharfIn(stdin, append(args, server)...)
		if code != 0 {
			t.Fatalf("wharf %v: exit %d: %s", args, code, errOut)
		}
		return out
	}
	must("Billing-Pass-5\n", "users", "add", "billing", "--tags", "management")
	must("", "vhosts", "add", "prod")
	if out := must("", "permissions", "set", "billing", "^billing\\.", ".*", ".*", "--vhost", "prod"); !strings.Contains(out, `user "billing" in vhost "prod"`) {
		t.Fatalf("permissions set: %q", out)
	}
	conn, err := amqp.Dial("amqp://billing:Billing-Pass-5@" + n.AMQPAddr() + "/prod")
	if err != nil {
		t.Fatalf("the new user in the new vhost: %v", err)
	}
	conn.Close()

	must("", "users", "set-tags", "billing", "monitoring", "management")
	var us []apiUser
	if err := json.Unmarshal([]byte(must("", "users", "list", "--output", "json")), &us); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, u := range us {
		found = found || u.Name == "billing" && strings.Join(u.Tags, ",") == "management,monitoring"
	}
	if !found {
		t.Fatalf("users list: %+v", us)
	}
	if _, ok := n.Users().Authenticate("billing", "Billing-Pass-5"); !ok {
		t.Fatal("set-tags lost the user's password")
	}
	must("", "users", "passwd", "billing", "Billing-Pass-6")
	if _, ok := n.Users().Authenticate("billing", "Billing-Pass-6"); !ok {
		t.Fatal("passwd did not change the password")
	}
	if out := must("", "permissions", "list", "--vhost", "prod"); !strings.Contains(out, "billing  prod   ^billing\\.") {
		t.Fatalf("permissions list:\n%s", out)
	}
	must("", "permissions", "clear", "billing", "--vhost", "prod")
	if _, err := amqp.Dial("amqp://billing:Billing-Pass-6@" + n.AMQPAddr() + "/prod"); err == nil {
		t.Fatal("the user still gets in after its permissions were cleared")
	}
	must("", "vhosts", "delete", "prod")
	must("", "users", "delete", "billing")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"users", "delete", "billing"}, `wharf: no user "billing"` + "\n"},
		{[]string{"vhosts", "delete", "prod"}, "wharf: no vhost prod\n"},
		{[]string{"users", "add", "x"}, "wharf: no password: give it as an argument or on stdin (see --help)\n"},
	} {
		if code, _, errOut := wharfIn("", append(tc.args, server)...); code == 0 || errOut != tc.want {
			t.Errorf("wharf %v: exit %d, stderr %q; want %q", tc.args, code, errOut, tc.want)
		}
	}
	if out := must("", "vhosts", "list"); strings.Contains(out, "prod") {
		t.Fatalf("vhosts list after delete:\n%s", out)
	}
}
