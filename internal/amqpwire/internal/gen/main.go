// Command gen writes methods_gen.go for package amqpwire from the AMQP 0-9-1
// machine-readable specification that ships inside the amqp091-go module.
//
// It is run by `go generate` in internal/amqpwire:
//
//	go run ./internal/gen -out methods_gen.go
//
// By default the spec is located with `go list -m`, because the module cache
// path differs between machines; -spec overrides that.
package main

import (
	_ "embed"
	"encoding/xml"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// specModule is the module whose spec/ folder holds the XML we generate from.
const specModule = "github.com/rabbitmq/amqp091-go"

// specFile is the spec's path inside specModule.
const specFile = "spec/amqp0-9-1.stripped.extended.xml"

// accessXML adds the access class, which the 0-9-1 spec dropped but RabbitMQ
// still speaks; see the comment inside the file.
//
//go:embed access.xml
var accessXML []byte

func main() {
	specPath := flag.String("spec", "", "path to amqp0-9-1.stripped.extended.xml (default: found with `go list -m "+specModule+"`)")
	outPath := flag.String("out", "methods_gen.go", "file to write")
	flag.Parse()

	if err := run(*specPath, *outPath); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(specPath, outPath string) error {
	if specPath == "" {
		dir, err := moduleDir(specModule)
		if err != nil {
			return err
		}
		specPath = filepath.Join(dir, filepath.FromSlash(specFile))
	}
	specXML, err := os.ReadFile(specPath)
	if err != nil {
		return err
	}
	src, err := generate(specXML, accessXML, filepath.Base(specPath))
	if err != nil {
		return err
	}
	return os.WriteFile(outPath, src, 0o644)
}

// moduleDir asks the go command where a module of the build list lives.
func moduleDir(module string) (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return "", fmt.Errorf("go list -m %s: %v: %s", module, err, ee.Stderr)
		}
		return "", fmt.Errorf("go list -m %s: %v", module, err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", fmt.Errorf("module %s is not downloaded (run `go mod download %s`) or pass -spec", module, module)
	}
	return dir, nil
}

// The XML shapes below cover only what the generator reads.

type xmlSpec struct {
	Major     int           `xml:"major,attr"`
	Minor     int           `xml:"minor,attr"`
	Revision  int           `xml:"revision,attr"`
	Port      int           `xml:"port,attr"`
	Constants []xmlConstant `xml:"constant"`
	Domains   []xmlDomain   `xml:"domain"`
	Classes   []xmlClass    `xml:"class"`
}

type xmlConstant struct {
	Name  string `xml:"name,attr"`
	Value int    `xml:"value,attr"`
	Class string `xml:"class,attr"` // "soft-error", "hard-error" or empty
}

type xmlDomain struct {
	Name string `xml:"name,attr"`
	Type string `xml:"type,attr"`
}

type xmlClass struct {
	Name    string      `xml:"name,attr"`
	Index   int         `xml:"index,attr"`
	Fields  []xmlField  `xml:"field"` // content properties; handled by hand in properties.go
	Methods []xmlMethod `xml:"method"`
}

type xmlMethod struct {
	Name        string        `xml:"name,attr"`
	Index       int           `xml:"index,attr"`
	Synchronous int           `xml:"synchronous,attr"`
	Content     int           `xml:"content,attr"`
	Deprecated  int           `xml:"deprecated,attr"`
	Chassis     []xmlChassis  `xml:"chassis"`
	Responses   []xmlResponse `xml:"response"`
	Fields      []xmlField    `xml:"field"`
}

type xmlChassis struct {
	Name string `xml:"name,attr"`
}

type xmlResponse struct {
	Name string `xml:"name,attr"`
}

type xmlField struct {
	Name     string `xml:"name,attr"`
	Domain   string `xml:"domain,attr"`
	Type     string `xml:"type,attr"`
	Reserved int    `xml:"reserved,attr"`
}

func parseSpec(b []byte) (*xmlSpec, error) {
	var s xmlSpec
	if err := xml.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	return &s, nil
}
