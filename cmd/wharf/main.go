// Command wharf is the Wharf message broker and its command-line client.
//
//	wharf serve                      run a broker
//	wharf topics create|list|...     manage topics over the Kafka protocol
//	wharf produce TOPIC              write stdin lines as records
//	wharf consume TOPIC              print records
//	wharf groups list|describe|...   inspect and manage consumer groups
//	wharf acls add|list|remove       manage Kafka ACLs
//	wharf policies set|list|clear    manage policies through the HTTP API
//	wharf users|vhosts|permissions   users, vhosts and permissions through the HTTP API
//	wharf version                    print the version (also --version)
//	wharf queues, exchanges, bindings, connections, definitions
//	                                 AMQP objects through the HTTP API
//
// Exit status: 0 on success, 1 when the command failed, 2 on a usage error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"syscall"
)

// stdio is what a subcommand reads and writes, so tests and main share one
// code path.
type stdio struct {
	in       io.Reader
	out, err io.Writer
}

// command is one `wharf NAME` subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, io stdio) error
}

func commands() []command {
	return []command{
		{"serve", "run a Wharf broker", runServe},
		{"topics", "create, list, describe, alter and delete topics", runTopics},
		{"cluster", "show a cluster's nodes, controller and partition leaders", runCluster},
		{"produce", "write stdin lines to a topic (key<TAB>value for keyed records)", runProduce},
		{"consume", "print a topic's records", runConsume},
		{"groups", "list, describe (with lag), reset offsets of and delete consumer groups", runGroups},
		{"acls", "add, list and remove Kafka ACLs (kafka-acls.sh flags; the broker needs --kafka-authorizer)", runACLs},
		{"queues", "list, get messages from, purge and delete AMQP queues (through the HTTP API)", runQueues},
		{"exchanges", "list AMQP exchanges (through the HTTP API)", runExchanges},
		{"bindings", "list AMQP bindings (through the HTTP API)", runBindings},
		{"connections", "list and close AMQP connections (through the HTTP API)", runConnections},
		{"definitions", "export and import queues, exchanges, bindings, policies, vhosts (through the HTTP API)", runDefinitions},
		{"policies", "set, list and clear RabbitMQ-style policies (through the HTTP API)", runPolicies},
		{"users", "add, list, delete users, change their passwords and tags (through the HTTP API)", runUsers},
		{"vhosts", "add, list and delete virtual hosts (through the HTTP API)", runVHosts},
		{"permissions", "set, list and clear users' permissions in a vhost (through the HTTP API)", runPermissions},
		{"version", "print the version and commit this binary was built from", runVersion},
	}
}

func main() {
	if len(os.Args) < 2 || os.Args[1] != "serve" {
		// A client command says itself what went wrong; net/http's own
		// log line (a server that speaks first, as NATS's INFO, is
		// "Unsolicited response received on idle HTTP channel") would
		// come before that explanation, or instead of it. The broker
		// keeps the log: its HTTP server reports there.
		log.SetOutput(io.Discard)
	}
	os.Exit(run(os.Args[1:], stdio{in: os.Stdin, out: os.Stdout, err: os.Stderr}))
}

// run dispatches to a subcommand and turns its error into an exit status.
func run(args []string, std stdio) int {
	if len(args) == 0 {
		printMainUsage(std.err)
		return 2
	}
	name, rest := args[0], args[1:]
	switch name {
	case "-h", "-help", "--help":
		printMainUsage(std.out)
		return 0
	case "-version", "--version":
		name = "version"
	case "help":
		if len(rest) == 0 {
			printMainUsage(std.out)
			return 0
		}
		name, rest = rest[0], []string{"--help"}
	}
	for _, c := range commands() {
		if c.name != name {
			continue
		}
		// Ctrl-C and SIGTERM cancel the command's context; each command
		// decides what a clean stop means for it.
		// After the first signal the default behaviour comes back, so a
		// second Ctrl-C kills a shutdown that hangs.
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		context.AfterFunc(ctx, stop)
		return exitStatus(c.run(ctx, rest, std), std.err)
	}
	fmt.Fprintf(std.err, "wharf: unknown command %q\n\n", name)
	printMainUsage(std.err)
	return 2
}

// usageError marks a command-line mistake (exit status 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

func exitStatus(err error, stderr io.Writer) int {
	var usage usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "wharf: %v (see --help)\n", err)
		return 2
	default:
		fmt.Fprintf(stderr, "wharf: %v\n", err)
		return 1
	}
}

func printMainUsage(w io.Writer) {
	fmt.Fprint(w, "Wharf is a message broker that speaks the Apache Kafka protocol and AMQP 0-9-1\n"+
		"(RabbitMQ's) over one durable log.\n\n")
	fmt.Fprint(w, "Usage:\n  wharf <command> [arguments]\n\nCommands:\n")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-12s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, "\nRun 'wharf <command> --help' for a command's flags; 'wharf --version' prints the version.\n")
}
