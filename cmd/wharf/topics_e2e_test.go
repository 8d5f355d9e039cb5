package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// The topics commands take Kafka's habits (--topic, --replication-factor),
// describe every topic without a name, delete several at once, print JSON
// for scripts and keep columns narrow beside a 249-character name.
func TestTopicsCommands(t *testing.T) {
	s := startServer(t, wharfBinary(t))
	s.mustWharf(t, "", "topics", "create", "--topic", "alpha", "--partitions", "2", "--replication-factor", "1")
	r := s.wharf(t, "", false, "topics", "create", "beta", "--replication-factor", "3")
	if r.status != 1 || !strings.Contains(r.stdout, "Replication factor: 3 larger than available brokers: 1.") {
		t.Errorf("create with replication factor 3: status %d, stdout %q", r.status, r.stdout)
	}
	long := strings.Repeat("x", 249)
	s.mustWharf(t, "", "topics", "create", "beta")
	s.mustWharf(t, "", "topics", "create", long)

	out := s.mustWharf(t, "", "topics", "list")
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(line, long) && len(line) > 40 {
			t.Errorf("topics list line %q is %d wide: the long name widened it", line, len(line))
		}
	}
	if !regexp.MustCompile(`(?m)^` + long + `\s+1\s+1$`).MatchString(out) {
		t.Errorf("topics list has no line for the long name:\n%s", out)
	}

	var listed []topicListEntry
	if err := json.Unmarshal([]byte(s.mustWharf(t, "", "topics", "list", "--output", "json")), &listed); err != nil ||
		len(listed) != 3 || listed[0] != (topicListEntry{Name: "alpha", Partitions: 2, Replicas: 1}) {
		t.Errorf("topics list --output json: %+v, %v", listed, err)
	}

	// describe without a name: every topic.
	out = s.mustWharf(t, "", "topics", "describe")
	if strings.Count(out, "SUMMARY\n") != 3 || !strings.Contains(out, "NAME        alpha\n") || !strings.Contains(out, "NAME        beta\n") {
		t.Errorf("topics describe without a name:\n%s", out)
	}
	var described []topicDescription
	if err := json.Unmarshal([]byte(s.mustWharf(t, "", "topics", "describe", "alpha", "--output", "json")), &described); err != nil ||
		len(described) != 1 || len(described[0].Partitions) != 2 || *described[0].Partitions[1].HighWatermark != 0 || len(described[0].Configs) == 0 {
		t.Errorf("topics describe alpha --output json: %+v, %v", described, err)
	}
	r = s.wharf(t, "", false, "topics", "describe", "alpha", "nosuch")
	if r.status != 1 || !strings.Contains(r.stderr, "topic nosuch does not exist") {
		t.Errorf("describe of a missing topic: status %d, stderr %q", r.status, r.stderr)
	}

	out = s.mustWharf(t, "", "topics", "delete", "alpha", "--topic", "beta")
	if !regexp.MustCompile(`(?m)^alpha\s+OK$`).MatchString(out) || !regexp.MustCompile(`(?m)^beta\s+OK$`).MatchString(out) {
		t.Errorf("topics delete alpha beta:\n%s", out)
	}
	if out := s.mustWharf(t, "", "topics", "list"); strings.Contains(out, "alpha") || strings.Contains(out, "beta") {
		t.Errorf("deleted topics still listed:\n%s", out)
	}
}

// groups list and describe print JSON for scripts; an unknown --state is
// refused rather than matching nothing.
func TestGroupsOutputJSON(t *testing.T) {
	s := startServer(t, wharfBinary(t))
	s.mustWharf(t, "", "topics", "create", "jobs")
	s.mustWharf(t, "1\n2\n3\n", "produce", "jobs")
	s.mustWharf(t, "", "consume", "jobs", "--group", "workers", "--from-beginning", "--num", "2")

	var groups []groupListEntry
	if err := json.Unmarshal([]byte(s.mustWharf(t, "", "groups", "list", "--state", "empty", "--output", "json")), &groups); err != nil ||
		len(groups) != 1 || groups[0].Group != "workers" || groups[0].State != "Empty" {
		t.Errorf("groups list --state empty --output json: %+v, %v", groups, err)
	}
	var d groupDescription
	if err := json.Unmarshal([]byte(s.mustWharf(t, "", "groups", "describe", "workers", "--output", "json")), &d); err != nil ||
		len(d.Lags) != 1 || *d.Lags[0].CurrentOffset != 2 || *d.Lags[0].LogEndOffset != 3 || *d.Lags[0].Lag != 1 || d.Lags[0].LagMillis == nil {
		t.Errorf("groups describe --output json: %+v, %v", d, err)
	}
	if r := s.wharf(t, "", false, "groups", "list", "--state", "Stabel"); r.status != 2 || !strings.Contains(r.stderr, `--state "Stabel"`) {
		t.Errorf("groups list --state Stabel: status %d, stderr %q", r.status, r.stderr)
	}
}
