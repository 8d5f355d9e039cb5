//go:build unix

package broker

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestSecondBrokerOnDataDirIsRefused: while one broker has a data
// directory open, a second Open of it fails and names the holder's pid;
// once the first closes, the directory opens again.
func TestSecondBrokerOnDataDirIsRefused(t *testing.T) {
	dir := t.TempDir()
	first := openTestBroker(t, dir)
	second, err := Open(Config{DataDir: dir})
	if err == nil {
		second.Close()
		t.Fatal("a second broker opened a data directory in use")
	}
	if want := "pid " + strconv.Itoa(os.Getpid()); !strings.Contains(err.Error(), want) {
		t.Errorf("refusal %q does not name the holder (%s)", err, want)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	third := openTestBroker(t, dir)
	if err := third.Close(); err != nil {
		t.Fatal(err)
	}
}
