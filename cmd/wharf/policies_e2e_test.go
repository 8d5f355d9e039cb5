package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// policies set echoes the definition the broker stored, as JSON; a bad
// definition fails in one plain line; an unknown --vhost says so.
func TestPoliciesCommands(t *testing.T) {
	s := startServer(t, wharfBinary(t))
	api := []string{"--http-server", s.httpAddr}
	policies := func(args ...string) result {
		return runWharf(t, "", nil, append(append([]string{"policies"}, args...), api...)...)
	}

	r := policies("set", "ttl", `^work\.`, `{"message-ttl": 60000, "dead-letter-exchange": "dlx"}`, "--priority", "1", "--apply-to", "queues")
	want := `Set policy "ttl" for pattern "^work\." to {"dead-letter-exchange":"dlx","message-ttl":60000} with priority 1, apply-to queues, on vhost "/"` + "\n"
	if r.status != 0 || r.stdout != want {
		t.Errorf("policies set: status %d, stdout %q, stderr %q; want %q", r.status, r.stdout, r.stderr, want)
	}

	r = policies("set", "bad", ".*", `{"message-ttl": "abc"}`)
	if r.status != 1 || !strings.HasPrefix(r.stderr, `wharf: set policy "bad": `) || !strings.Contains(r.stderr, "abc") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("an invalid policy: status %d, stderr %q; want one line that names the value", r.status, r.stderr)
	}

	for _, args := range [][]string{{"list", "--vhost", "nosuch"}, {"set", "p", ".*", `{"max-length":1}`, "--vhost", "nosuch"}, {"clear", "ttl", "--vhost", "nosuch"}} {
		if r := policies(args...); r.status != 1 || r.stderr != "wharf: no vhost nosuch\n" {
			t.Errorf("policies %q: status %d, stderr %q; want \"no vhost nosuch\"", args, r.status, r.stderr)
		}
	}

	var listed []storedPolicy
	r = policies("list", "--output", "json")
	if err := json.Unmarshal([]byte(r.stdout), &listed); err != nil || len(listed) != 1 || listed[0].Name != "ttl" || listed[0].Pattern != `^work\.` {
		t.Errorf("policies list --output json: %q, %v", r.stdout, err)
	}
	if r := policies("clear", "ttl"); r.status != 0 || r.stdout != `Cleared policy "ttl" on vhost "/"`+"\n" {
		t.Errorf("policies clear: status %d, stdout %q, stderr %q", r.status, r.stdout, r.stderr)
	}
}
