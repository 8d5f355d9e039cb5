package main

import "fmt"

// subcommandHelp names one command of a group such as `wharf topics`.
type subcommandHelp struct{ name, summary string }

// selectSubcommand finds the command args[0] names among cmds of `wharf
// group` and returns its index. With no arguments or a help flag it prints
// the group's usage instead and returns -1, with a usage error when the
// command is missing.
func selectSubcommand(group string, cmds []subcommandHelp, args []string, std stdio) (int, error) {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		w := std.out
		if len(args) == 0 {
			w = std.err
		}
		width := 0
		for _, c := range cmds {
			width = max(width, len(c.name)+1)
		}
		fmt.Fprintf(w, "Usage: wharf %s <command> [arguments]\n\nCommands:\n", group)
		for _, c := range cmds {
			fmt.Fprintf(w, "  %-*s %s\n", width, c.name, c.summary)
		}
		if len(args) == 0 {
			return -1, usagef("missing %s command", group)
		}
		return -1, nil
	}
	for i, c := range cmds {
		if c.name == args[0] {
			return i, nil
		}
	}
	return -1, usagef("unknown %s command %q", group, args[0])
}
