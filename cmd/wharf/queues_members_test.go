package main

import (
	"strings"
	"testing"
)

// TestQueuesGrowMembership: grow takes rabbitmq-queues grow's
// --membership promotable and voter (Wharf's members all join as
// learners and vote once caught up), and refuses non_voter and anything
// else as a usage error, before asking the API.
func TestQueuesGrowMembership(t *testing.T) {
	noAPI := "--http-server=127.0.0.1:1" // nothing listens: a request fails
	for _, c := range []struct {
		membership string
		usage      bool
		want       string
	}{
		{"promotable", false, "127.0.0.1:1"},
		{"voter", false, "127.0.0.1:1"},
		{"non_voter", true, "no members that never vote"},
		{"observer", true, "promotable or voter"},
	} {
		status, _, stderr := runCLI("queues", "grow", "2", "--membership", c.membership, "--errors-only", noAPI)
		if (status == 2) != c.usage || !strings.Contains(stderr, c.want) {
			t.Errorf("--membership %s: status %d, %q; want usage error %v mentioning %q", c.membership, status, stderr, c.usage, c.want)
		}
	}
}
