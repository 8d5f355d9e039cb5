package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// envPrefix starts every environment variable that sets a flag:
// --kafka-addr is WHARF_KAFKA_ADDR.
const envPrefix = "WHARF_"

// errFlagParse wraps flag-package parse errors, which the flag package has
// already reported together with the usage text.
var errFlagParse = errors.New("invalid command line")

// envName is the environment variable that backs a flag.
func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// newFlagSet makes a subcommand's FlagSet whose --help shows usage, a
// one-paragraph description and the flags.
func newFlagSet(name, usage, description string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("wharf "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: wharf %s %s\n\n%s\n", name, usage, description)
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			fmt.Fprint(fs.Output(), "\nFlags:\n")
			fs.PrintDefaults()
		}
	}
	return fs
}

// bindEnv marks flags as settable from their environment variables (named by
// envName) and says so in their help text. parseArgs applies them.
func bindEnv(fs *flag.FlagSet, names ...string) []string {
	for _, name := range names {
		f := fs.Lookup(name)
		if f == nil {
			panic("bindEnv: no flag " + name)
		}
		f.Usage += " (env " + envName(name) + ")"
	}
	return names
}

// parseArgs parses args, allowing flags before, between and after the
// positional arguments (`topics create NAME --partitions 3`), which the flag
// package alone stops at. "--" ends flag parsing. Flags in envFlags that were
// not given on the command line then take their environment variable's value
// when it is set: flag beats environment beats default.
func parseArgs(fs *flag.FlagSet, args []string, envFlags []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %v", errFlagParse, err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		// fs.Parse consumes a "--" terminator itself; detect it by
		// comparing with what was passed in.
		if consumedTerminator(args, rest) {
			positional = append(positional, rest...)
			break
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
	return positional, applyEnv(fs, envFlags)
}

// consumedTerminator reports whether fs.Parse stopped at a "--" (which it
// drops) rather than at a positional argument.
func consumedTerminator(args, rest []string) bool {
	i := len(args) - len(rest) - 1
	return i >= 0 && args[i] == "--"
}

func applyEnv(fs *flag.FlagSet, envFlags []string) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for _, name := range envFlags {
		if given[name] {
			continue
		}
		value, ok := os.LookupEnv(envName(name))
		if !ok {
			continue
		}
		if err := fs.Set(name, value); err != nil {
			return usagef("environment variable %s=%q: %v", envName(name), value, err)
		}
	}
	return nil
}

// stringList is a repeatable string flag (--config a=1 --config b=2).
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// parseConfigs turns k=v arguments into a config map.
func parseConfigs(pairs []string) (map[string]*string, error) {
	configs := make(map[string]*string, len(pairs))
	for _, pair := range pairs {
		k, v, ok := strings.Cut(pair, "=")
		if !ok || k == "" {
			return nil, usagef("--config %q: want key=value", pair)
		}
		configs[k] = &v
	}
	return configs, nil
}

// expectArgs checks the number of positional arguments.
func expectArgs(args []string, want int, what string) error {
	switch {
	case len(args) < want:
		return usagef("missing %s", what)
	case len(args) > want:
		return usagef("unexpected arguments: %s", strings.Join(args[want:], " "))
	}
	return nil
}
