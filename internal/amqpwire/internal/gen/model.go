package main

import (
	"fmt"
	"slices"
	"strings"
)

// model is the spec after domains are resolved and names are turned into Go.
type model struct {
	source                 string // base name of the spec file, for the header comment
	major, minor, revision int
	port                   int
	frameTypes, frameSizes []constant
	replyCodes             []constant
	classes                []class
}

type constant struct {
	specName string // "not-found"
	goName   string // "NotFound"
	value    int
	hard     bool // a hard-error reply code: closes the connection
}

type class struct {
	specName string
	goName   string
	index    int
	methods  []method
}

type method struct {
	specName    string // "declare-ok"
	fullName    string // "queue.declare-ok"
	goName      string // "QueueDeclareOK"
	classIndex  int
	index       int
	synchronous bool
	content     bool
	deprecated  bool
	sentBy      []string // "client" and/or "server"
	responses   []string // full spec names of the replies
	fields      []field
}

type field struct {
	specName string // "auto-delete"
	goName   string // "AutoDelete"
	wireType string // one of the spec's primitive types: bit, octet, short, ...
	reserved bool
}

// goTypes maps the spec's primitive types to the Go types of struct fields.
var goTypes = map[string]string{
	"bit":       "bool",
	"octet":     "uint8",
	"short":     "uint16",
	"long":      "uint32",
	"longlong":  "uint64",
	"shortstr":  "string",
	"longstr":   "string",
	"table":     "Table",
	"timestamp": "time.Time",
}

// frameTypeConstants are the spec constants that name frame types; the other
// frame-* constants are sizes or markers, everything else is a reply code.
var frameTypeConstants = map[string]bool{
	"frame-method": true, "frame-header": true, "frame-body": true, "frame-heartbeat": true,
}

var frameSizeConstants = map[string]bool{"frame-min-size": true, "frame-end": true}

// methodNames are the names the generated structs already use for methods;
// a spec field with one of these names would not compile.
var methodNames = map[string]bool{
	"ID": true, "Name": true, "HasContent": true, "Synchronous": true,
	"Encode": true, "Decode": true,
}

func buildModel(spec *xmlSpec, supplements []*xmlSpec, source string) (*model, error) {
	m := &model{
		source: source, major: spec.Major, minor: spec.Minor, revision: spec.Revision, port: spec.Port,
	}

	for _, c := range spec.Constants {
		k := constant{specName: c.Name, goName: goName(c.Name), value: c.Value, hard: c.Class == "hard-error"}
		switch {
		case frameTypeConstants[c.Name]:
			m.frameTypes = append(m.frameTypes, k)
		case frameSizeConstants[c.Name]:
			m.frameSizes = append(m.frameSizes, k)
		case c.Class == "soft-error" || c.Class == "hard-error" || c.Name == "reply-success":
			m.replyCodes = append(m.replyCodes, k)
		default:
			return nil, fmt.Errorf("constant %q: unknown kind; teach the generator about it", c.Name)
		}
	}

	domains := map[string]string{}
	for _, d := range spec.Domains {
		domains[d.Name] = d.Type
	}

	xmlClasses := slices.Clone(spec.Classes)
	for _, s := range supplements {
		xmlClasses = append(xmlClasses, s.Classes...)
	}
	for _, xc := range xmlClasses {
		c := class{specName: xc.Name, goName: goName(xc.Name), index: xc.Index}
		for _, xm := range xc.Methods {
			meth, err := buildMethod(xc, xm, domains)
			if err != nil {
				return nil, err
			}
			c.methods = append(c.methods, meth)
		}
		slices.SortFunc(c.methods, func(a, b method) int { return a.index - b.index })
		m.classes = append(m.classes, c)
	}
	slices.SortFunc(m.classes, func(a, b class) int { return a.index - b.index })
	return m, checkUnique(m)
}

func buildMethod(xc xmlClass, xm xmlMethod, domains map[string]string) (method, error) {
	full := xc.Name + "." + xm.Name
	meth := method{
		specName:    xm.Name,
		fullName:    full,
		goName:      goName(xc.Name) + goName(xm.Name),
		classIndex:  xc.Index,
		index:       xm.Index,
		synchronous: xm.Synchronous == 1,
		content:     xm.Content == 1,
		deprecated:  xm.Deprecated == 1,
	}
	// A chassis element says which peer must implement (receive) the method,
	// so the sender is the other one.
	for _, ch := range xm.Chassis {
		switch ch.Name {
		case "server":
			meth.sentBy = append(meth.sentBy, "client")
		case "client":
			meth.sentBy = append(meth.sentBy, "server")
		}
	}
	slices.Sort(meth.sentBy)
	for _, r := range xm.Responses {
		meth.responses = append(meth.responses, xc.Name+"."+r.Name)
	}
	for _, xf := range xm.Fields {
		t, err := resolveType(xf, domains)
		if err != nil {
			return method{}, fmt.Errorf("%s field %s: %w", full, xf.Name, err)
		}
		f := field{specName: xf.Name, goName: goName(xf.Name), wireType: t, reserved: xf.Reserved == 1}
		if methodNames[f.goName] {
			return method{}, fmt.Errorf("%s field %s: Go name %s clashes with a generated method", full, xf.Name, f.goName)
		}
		meth.fields = append(meth.fields, f)
	}
	return meth, nil
}

// resolveType follows a field's domain (domains may name other domains) down
// to one of the primitive types.
func resolveType(f xmlField, domains map[string]string) (string, error) {
	t := f.Type
	if t == "" {
		t = f.Domain
	}
	for range 10 {
		if _, ok := goTypes[t]; ok {
			return t, nil
		}
		next, ok := domains[t]
		if !ok {
			return "", fmt.Errorf("unknown domain or type %q", t)
		}
		if next == t {
			break
		}
		t = next
	}
	return "", fmt.Errorf("domain %q does not resolve to a primitive type", t)
}

func checkUnique(m *model) error {
	seen := map[string]string{}
	for _, c := range m.classes {
		for _, meth := range c.methods {
			id := fmt.Sprintf("%d.%d", meth.classIndex, meth.index)
			if prev, ok := seen[id]; ok {
				return fmt.Errorf("%s and %s share id %s", prev, meth.fullName, id)
			}
			seen[id] = meth.fullName
		}
	}
	return nil
}

// initialisms are name parts written in capitals, following Go style.
var initialisms = map[string]string{"id": "ID", "ok": "OK"}

// wordSplits fixes spec names that run words together.
var wordSplits = map[string]string{"nowait": "no-wait"}

// goName turns "auto-delete" into "AutoDelete" and "get-ok" into "GetOK".
func goName(spec string) string {
	if s, ok := wordSplits[spec]; ok {
		spec = s
	}
	var b strings.Builder
	for _, part := range strings.Split(spec, "-") {
		if up, ok := initialisms[part]; ok {
			b.WriteString(up)
			continue
		}
		if part == "" {
			continue
		}
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

// uses reports whether any method has a field of the given wire type.
func (m *model) uses(wireType string) bool {
	for _, c := range m.classes {
		for _, meth := range c.methods {
			for _, f := range meth.fields {
				if f.wireType == wireType {
					return true
				}
			}
		}
	}
	return false
}
