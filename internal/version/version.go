// Package version reports which build of Wharf is running, from the module
// and VCS information the Go toolchain embeds in every binary, so that
// `wharf version`, AMQP's server properties and the HTTP API's
// product_version all say the same thing without a build script.
package version

import (
	"runtime/debug"
	"strings"
)

// Info is what one build knows about itself.
type Info struct {
	Version  string // module version: a tag such as v0.3.0, or "(devel)" for a build from a work tree
	Commit   string // VCS revision the binary was built from; empty when built without VCS information
	Modified bool   // the work tree had uncommitted changes
	Go       string // the Go toolchain that built it
}

// Read returns this binary's build information.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Version: "(devel)"}
	}
	info := Info{Version: bi.Main.Version, Go: bi.GoVersion}
	if info.Version == "" {
		info.Version = "(devel)"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Commit = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info
}

// String is the short form protocols announce: the module version, plus
// the first 12 digits of the commit when there is one, e.g.
// "v0.3.0" or "(devel)+6bf89c5e2a1b-dirty".
func String() string {
	return Read().String()
}

func (i Info) String() string {
	var b strings.Builder
	b.WriteString(i.Version)
	if i.Commit != "" && !strings.Contains(i.Version, shortCommit(i.Commit)) {
		b.WriteString("+")
		b.WriteString(shortCommit(i.Commit))
		if i.Modified {
			b.WriteString("-dirty")
		}
	}
	return b.String()
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}
