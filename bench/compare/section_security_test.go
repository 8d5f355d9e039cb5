package main

import (
	"strings"
	"testing"
)

func TestCPUPerMBNoteSaysTheClientsShare(t *testing.T) {
	note := cpuPerMBNote("SSL",
		figures{"brokerms": 0.7, "clientms": 1.7},
		figures{"brokerms": 0.3, "clientms": 1.3})
	for _, want := range []string{"broker: 0.700 ms (SSL), 0.300 ms (PLAINTEXT)", "SSL adds 0.800 ms per MB, 50 % of it the client's"} {
		if !strings.Contains(note, want) {
			t.Errorf("note %q does not say %q", note, want)
		}
	}
}
