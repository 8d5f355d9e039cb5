package architecture_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/wharf-mq/wharf/"

// Groups of packages the rules speak of, by path in the module.
var (
	frontEnds = []string{"internal/kafka", "internal/amqp", "internal/httpapi", "internal/nats"}
	// The Kafka core: topics, partitions and the metadata log, and the
	// coordinators that keep their state in internal topics.
	kafkaCore = []string{"internal/broker", "internal/group", "internal/txn"}
	// The queueing core and the storage of its durable queues.
	queueCore = []string{"internal/mq", "internal/queuestore"}
	// The subject routing core (Core NATS keeps nothing on disk).
	subjectCore = []string{"internal/subjects"}
	// The JetStream core: streams and consumers, on Kafka topics and a
	// state log of its own.
	jetstreamCore = []string{"internal/jetstream"}
	// The composition root and what only its users import.
	composition = []string{"internal/node", "internal/nodetest", "internal/streambridge", "internal/subjectbridge"}
)

// rule says that no package of from may import one of not: directly, or
// (unless direct) through any chain of imports.
type rule struct {
	from, not []string
	direct    bool
	why       string
}

// rules are the dependency rules; docs/architecture.md explains them.
func rules() []rule {
	rs := []rule{
		{from: kafkaCore, not: slices.Concat(queueCore, []string{"internal/streambridge"}),
			why: "the Kafka core does not know the queueing core: the node joins them through hooks and the stream bridge"},
		{from: queueCore, not: slices.Concat(kafkaCore, []string{"internal/streambridge"}),
			why: "the queueing core reaches Kafka topics only through mq.StreamStore, which the node fills in"},
		{from: queueCore, not: subjectCore,
			why: "the queueing core shares amq.topic with NATS subjects only through mq.ExchangeObserver, which the node installs"},
		{from: subjectCore, not: slices.Concat(queueCore, kafkaCore, jetstreamCore),
			why: "the subject router knows no other core: another protocol's subscribers are Sinks the node's subject bridge adds"},
		{from: jetstreamCore, not: slices.Concat(kafkaCore, queueCore, []string{"internal/streambridge"}),
			why: "the JetStream core reaches Kafka topics only through jetstream.LogStore, which the node fills in"},
		{from: slices.Concat(kafkaCore, queueCore), not: jetstreamCore,
			why: "the Kafka and queueing cores do not know JetStream: the node tells the Kafka core which topics hold streams"},
		{from: []string{"internal/queuestore"}, not: []string{"internal/mq", "internal/amqpwire"},
			why: "queue storage lies below the queueing core and knows no AMQP: a replicated store will replace it"},
		{from: slices.Concat(kafkaCore, queueCore, subjectCore, jetstreamCore), not: frontEnds,
			why: "cores serve front ends, never the other way"},
		{from: frontEnds, not: []string{"internal/queuestore"}, direct: true,
			why: "a front end reaches storage only through its core"},
		{from: slices.Concat(kafkaCore, queueCore, jetstreamCore, frontEnds, composition, []string{"internal/metrics", "internal/kafkaview"}), not: []string{"internal/seglog"}, direct: true,
			why: "every log is reached through the log seam, internal/replica: the cores hold replica.Log, reads are replica.Slices"},
		{from: []string{"internal/replica"}, not: slices.Concat(kafkaCore, queueCore, jetstreamCore, frontEnds, composition),
			why: "the log seam lies below the cores: replication must not depend on what it replicates"},
		{from: slices.Concat(kafkaCore, queueCore, subjectCore, jetstreamCore, frontEnds, []string{"internal/replica", "internal/seglog", "internal/record"}), not: composition,
			why: "only the node wires the cores together; nothing below it imports it"},
	}
	for _, fe := range frontEnds {
		others := slices.DeleteFunc(slices.Clone(frontEnds), func(p string) bool {
			return p == fe || managedBy[fe] == p
		})
		rs = append(rs, rule{from: []string{fe}, not: others, why: "front ends are independent"})
	}
	return rs
}

// managedBy lets a management front end read the front end it manages:
// RabbitMQ's management API lists and closes AMQP connections and
// channels, which only the AMQP front end knows.
var managedBy = map[string]string{"internal/httpapi": "internal/amqp"}

// knownViolations are today's breaks of a rule ("from -> not"), each with
// why it is there and what removes it. A break not listed fails the test,
// and so does a listed one that is gone: the list shrinks with the code.
var knownViolations = map[string]string{}

func TestDependencyRules(t *testing.T) {
	pkgs := listPackages(t)
	found := map[string]bool{}
	for _, r := range rules() {
		for _, from := range r.from {
			p, ok := pkgs[from]
			if !ok {
				t.Errorf("rule %q names %s, which does not exist: update the rule", r.why, from)
				continue
			}
			reach := p.deps
			if r.direct {
				reach = p.imports
			}
			for _, not := range r.not {
				if _, ok := pkgs[not]; !ok {
					t.Errorf("rule %q names %s, which does not exist: update the rule", r.why, not)
				}
				if !reach[not] {
					continue
				}
				key := from + " -> " + not
				found[key] = true
				if _, known := knownViolations[key]; known {
					continue
				}
				how := ""
				if !p.imports[not] {
					how = " (through other packages)"
				}
				t.Errorf("%s imports %s%s: %s", from, not, how, r.why)
			}
		}
	}
	for key, reason := range knownViolations {
		if !found[key] {
			t.Errorf("known violation %q (%s) is gone: remove it from knownViolations", key, reason)
		}
	}
}

// pkg is one package's imports, direct and transitive, by path in the
// module (other modules' and the standard library's left out).
type pkg struct{ imports, deps map[string]bool }

func listPackages(t *testing.T) map[string]pkg {
	t.Helper()
	out, err := exec.Command(goTool(), "list", "-f", "{{.ImportPath}}|{{join .Imports \" \"}}|{{join .Deps \" \"}}",
		module+"...").Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]pkg{}
	for line := range strings.Lines(string(out)) {
		fields := strings.Split(strings.TrimSpace(line), "|")
		if len(fields) != 3 {
			t.Fatalf("go list line %q", line)
		}
		pkgs[strings.TrimPrefix(fields[0], module)] = pkg{imports: inModule(fields[1]), deps: inModule(fields[2])}
	}
	return pkgs
}

func inModule(list string) map[string]bool {
	m := map[string]bool{}
	for p := range strings.FieldsSeq(list) {
		if rest, ok := strings.CutPrefix(p, module); ok {
			m[rest] = true
		}
	}
	return m
}

// goTool is the go command running this test: $GOROOT/bin/go when go test
// set GOROOT, else whatever "go" is on PATH.
func goTool() string {
	if root := os.Getenv("GOROOT"); root != "" {
		p := filepath.Join(root, "bin", "go")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "go"
}
