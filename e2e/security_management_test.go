package e2e

import (
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// TestRabbitmqadminManagesUsersVHostsPermissions: RabbitMQ's own
// rabbitmqadmin (3.10's, which has no topic permissions) declares a
// vhost, a user with a tag and its permission, and lists them, against
// Wharf; the user then works
// over AMQP within them, and deleting it takes it away.
func TestRabbitmqadminManagesUsersVHostsPermissions(t *testing.T) {
	requireRabbitmqadmin(t)
	t.Parallel()
	n := startNode(t)
	rabbitmqadmin(t, n, "declare", "vhost", "name=orders")
	rabbitmqadmin(t, n, "declare", "user", "name=billing", "password=Billing-Pass-3", "tags=management")
	rabbitmqadmin(t, n, "declare", "permission", "vhost=orders", "user=billing", "configure=^billing\\.", "write=.*", "read=.*")

	if out := rabbitmqadmin(t, n, "-q", "-f", "tsv", "list", "users", "name", "tags"); !strings.Contains(out, "billing\tmanagement\n") ||
		!strings.Contains(out, "guest\tadministrator\n") {
		t.Fatalf("list users: %q", out)
	}
	if out := rabbitmqadmin(t, n, "-q", "-f", "tsv", "list", "vhosts", "name"); out != "/\norders\n" {
		t.Fatalf("list vhosts: %q", out)
	}
	if out := rabbitmqadmin(t, n, "-q", "-f", "tsv", "list", "permissions", "user", "vhost", "configure"); !strings.Contains(out, "billing\torders\t^billing\\.\n") ||
		!strings.Contains(out, "guest\torders\t.*\n") { // the vhost's creator
		t.Fatalf("list permissions: %q", out)
	}

	conn, err := amqp.Dial("amqp://billing:Billing-Pass-3@" + n.AMQPAddr() + "/orders")
	if err != nil {
		t.Fatalf("the user rabbitmqadmin made: %v", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("billing.eu", false, false, false, false, nil); err != nil {
		t.Fatalf("a queue within the permission: %v", err)
	}
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	rabbitmqadmin(t, n, "delete", "user", "name=billing")
	if e := <-closed; e == nil || e.Code != amqp.ConnectionForced {
		t.Fatalf("the deleted user's connection: %v", e)
	}
	if out := rabbitmqadmin(t, n, "-q", "-f", "tsv", "list", "permissions", "user"); strings.Contains(out, "billing") {
		t.Fatalf("the deleted user's permissions: %q", out)
	}
}
