package main

import (
	"context"
	"fmt"

	"github.com/wharf-mq/wharf/internal/version"
)

// runVersion prints the version this binary announces over AMQP
// (connection.start's "version") and the HTTP API (product_version), and
// on a second line the full commit and the Go toolchain.
func runVersion(_ context.Context, args []string, std stdio) error {
	fs := newFlagSet("version", "", "Prints the version and commit this binary was built from.", std.out)
	positional, err := parseArgs(fs, args, nil)
	if err != nil {
		return err
	}
	if err := expectArgs(positional, 0, ""); err != nil {
		return err
	}
	info := version.Read()
	fmt.Fprintln(std.out, info.String())
	_, err = fmt.Fprintf(std.out, "commit %s, built with %s\n", orUnknown(info.Commit), orUnknown(info.Go))
	return err
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
