package queuestore

import (
	"os"
	"path/filepath"
	"testing"
)

// One directory fsync covers every change announced before it began.
func TestDirSyncCoversEarlierChanges(t *testing.T) {
	root := filepath.Join(t.TempDir(), "queues")
	d, err := openDirSync(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(root); err != nil {
		t.Fatalf("directory not created: %v", err)
	}
	a, b := d.changed(), d.changed()
	if err := d.syncThrough(a); err != nil {
		t.Fatal(err)
	}
	if d.synced != b {
		t.Fatalf("fsync for change %d covered up to %d, want %d (announced before it)", a, d.synced, b)
	}
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	// Covered already: no fsync (which would fail on the removed directory).
	if err := d.syncThrough(b); err != nil {
		t.Fatalf("change already covered fsynced again: %v", err)
	}
	if err := d.syncThrough(d.changed()); err == nil {
		t.Fatal("a new change was not fsynced")
	}
}
