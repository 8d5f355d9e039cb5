package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// `wharf version` and `wharf --version` print the version that a `wharf
// serve` of the same binary announces in AMQP's server properties and the
// HTTP API's product_version.
func TestVersionIsWhatTheBrokerAnnounces(t *testing.T) {
	bin := wharfBinary(t)
	r := runWharf(t, "", nil, "version")
	if r.status != 0 {
		t.Fatalf("wharf version: status %d, stderr %q", r.status, r.stderr)
	}
	version, _, _ := strings.Cut(r.stdout, "\n")
	if version == "" || !strings.Contains(r.stdout, "commit ") {
		t.Fatalf("wharf version printed %q, want the version, then the commit", r.stdout)
	}
	if flag := runWharf(t, "", nil, "--version"); flag.status != 0 || flag.stdout != r.stdout {
		t.Errorf("wharf --version: status %d, %q; want %q", flag.status, flag.stdout, r.stdout)
	}

	s := startServer(t, bin)
	conn, err := amqp.Dial("amqp://guest:guest@" + s.amqpAddr + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if got := conn.Properties["version"]; got != version {
		t.Errorf("AMQP server property version = %q, want %q", got, version)
	}

	req, err := http.NewRequest(http.MethodGet, "http://"+s.httpAddr+"/api/overview", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("guest", "guest")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var overview struct {
		ProductVersion string `json:"product_version"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&overview); err != nil {
		t.Fatal(err)
	}
	if overview.ProductVersion != version {
		t.Errorf("/api/overview product_version = %q, want %q", overview.ProductVersion, version)
	}
}
