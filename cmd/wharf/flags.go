package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"strings"
)

// envPrefix starts every environment variable that sets a flag:
// --kafka-addr is WHARF_KAFKA_ADDR.
const envPrefix = "WHARF_"

// envName is the environment variable that backs a flag.
func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// newFlagSet makes a subcommand's FlagSet. Its --help prints the usage
// line, a one-paragraph description and the flags, with two dashes as the
// README writes them, to help (stdout); parseArgs turns every other parse
// problem into a usage error for stderr.
func newFlagSet(name, usage, description string, help io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("wharf "+name, flag.ContinueOnError)
	fs.SetOutput(help)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: %s\n\n%s\n", strings.TrimSpace("wharf "+name+" "+usage), description)
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			fmt.Fprint(w, "\nFlags:\n")
			printFlags(w, fs)
		}
	}
	return fs
}

// printFlags lists fs's flags as `--name type` and an indented
// description. The default is added only when it is not the type's zero
// value and the description does not already say "default: ...".
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		typeName, usage := flag.UnquoteUsage(f)
		line := "  " + dashed(f.Name)
		if typeName != "" {
			line += " " + typeName
		}
		if !strings.Contains(strings.ToLower(usage), "default:") && !isZeroDefault(f) {
			// Before bindEnv's " (env X)", which stays last.
			text, env, _ := strings.Cut(usage, " (env ")
			usage = fmt.Sprintf("%s (default: %s)", text, f.DefValue)
			if env != "" {
				usage += " (env " + env
			}
		}
		fmt.Fprintf(w, "%s\n        %s\n", line, strings.ReplaceAll(usage, "\n", "\n        "))
	})
}

// dashed is how help and errors write a flag: -v, --partitions.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// isZeroDefault reports whether f's default is its type's zero value
// (0, "", false, an empty list), which help does not spell out.
func isZeroDefault(f *flag.Flag) bool {
	t := reflect.TypeOf(f.Value)
	if t.Kind() != reflect.Pointer {
		return false
	}
	zero, ok := reflect.New(t.Elem()).Interface().(flag.Value)
	return ok && zero.String() == f.DefValue
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
//
// --help prints the help to the flag set's output and returns
// flag.ErrHelp; any other problem is a usage error.
func parseArgs(fs *flag.FlagSet, args []string, envFlags []string) ([]string, error) {
	var positional []string
	for {
		if err := parseQuietly(fs, args); err != nil {
			return nil, err
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

// parseQuietly runs fs.Parse, which prints a problem and the whole help
// to its output: only a requested help reaches the output, a problem
// becomes a one-line usage error.
func parseQuietly(fs *flag.FlagSet, args []string) error {
	out := fs.Output()
	var printed bytes.Buffer
	fs.SetOutput(&printed)
	err := fs.Parse(args)
	fs.SetOutput(out)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		if _, werr := out.Write(printed.Bytes()); werr != nil {
			return werr
		}
		return err
	}
	return usageError{singleDashFlag.ReplaceAllString(err.Error(), "${1}--$2")}
}

// singleDashFlag finds the flag package's -name in its error messages, to
// write it as --name.
var singleDashFlag = regexp.MustCompile(`(^|[\s:])-([a-z][a-z0-9-]+)`)

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

// oneTopic is the one topic a command names, as its argument or with
// --topic (Kafka's console tools' habit).
func oneTopic(positional []string, topicFlag string) (string, error) {
	if topicFlag != "" {
		positional = append(positional, topicFlag)
	}
	if err := expectArgs(positional, 1, "topic name"); err != nil {
		return "", err
	}
	return positional[0], nil
}
