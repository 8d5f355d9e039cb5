package broker

import (
	"fmt"
	"slices"
	"sync"
	"testing"
)

// putIfSteps writes key through stores (round robin: in a cluster, from
// every node) and returns what a watcher on watched heard: a PutIf on
// the live value applies; one on a value replaced meanwhile, or on a key
// deleted meanwhile, is ignored, and the watcher hears the value as it
// stays.
func putIfSteps(t *testing.T, watched *DefinitionStore, stores ...*DefinitionStore) []string {
	t.Helper()
	var mu sync.Mutex
	var heard []string
	watched.Watch("k", func(key string) {
		value, _ := watched.Get(key)
		mu.Lock()
		heard = append(heard, string(value))
		mu.Unlock()
	})
	defer watched.Watch("k", nil)
	at := func(i int) *DefinitionStore { return stores[i%len(stores)] }
	steps := []func() error{
		func() error { return at(0).Put("k", []byte("v1")) },
		func() error { return at(1).PutIf("k", []byte("v2"), []byte("v1")) }, // applies
		func() error { return at(2).PutIf("k", []byte("v3"), []byte("v1")) }, // v1 replaced: ignored
		func() error { return at(3).Delete("k") },
		func() error { return at(4).PutIf("k", []byte("v4"), []byte("v2")) }, // deleted: ignored
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i+1, err)
		}
	}
	if err := watched.Barrier(); err != nil { // watched applied every step
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(heard)
}

// TestDefinitionPutIfSingleNode: a PutIf whose value is gone is ignored,
// and stays ignored at replay.
func TestDefinitionPutIfSingleNode(t *testing.T) {
	dir := t.TempDir()
	b := openTestBroker(t, dir)
	if got, want := fmt.Sprint(putIfSteps(t, b.Definitions(), b.Definitions())), "[v1 v2 ]"; got != want {
		t.Fatalf("the watcher heard %s, want %s", got, want)
	}
	if err := b.Definitions().PutIf("k", []byte("v5"), []byte("v2")); err != nil { // no live value: ignored
		t.Fatal(err)
	}
	b.Close()
	b = openTestBroker(t, dir)
	defer b.Close()
	if value, ok := b.Definitions().Get("k"); ok {
		t.Fatalf("after a restart k is %q, want it deleted", value)
	}
}

// TestDefinitionPutIfCluster: every node decides alike, as it applies a
// PutIf, whether it applies; its followers hear the value as applied; a
// restarted node's replay decides the same.
func TestDefinitionPutIfCluster(t *testing.T) {
	c := newTestCluster(t, 3)
	var stores []*DefinitionStore
	for _, id := range c.ids {
		stores = append(stores, c.broker(id).Definitions())
	}
	if got, want := fmt.Sprint(putIfSteps(t, stores[2], stores...)), "[v1 v2 v2  ]"; got != want {
		t.Fatalf("node 3's watcher heard %s, want %s", got, want)
	}
	for i, s := range stores {
		if err := s.Barrier(); err != nil {
			t.Fatal(err)
		}
		if value, ok := s.Get("k"); ok {
			t.Fatalf("node %d holds k = %q, want it deleted", i+1, value)
		}
	}
	c.stop(2)
	b, err := c.restart(2)
	if err != nil {
		t.Fatal(err)
	}
	if value, ok := b.Definitions().Get("k"); ok {
		t.Fatalf("after a restart node 2 holds k = %q, want it deleted", value)
	}
}

// createSteps creates key "c" through stores (round robin) with PutIf on
// no value: the first creation applies, the second is ignored, and once
// the key is deleted a third applies again. It returns the key's value
// as stores[0] holds it after each step.
func createSteps(t *testing.T, stores ...*DefinitionStore) []string {
	t.Helper()
	at := func(i int) *DefinitionStore { return stores[i%len(stores)] }
	steps := []func() error{
		func() error { return at(0).PutIf("c", []byte("a"), nil) }, // creates
		func() error { return at(1).PutIf("c", []byte("b"), nil) }, // exists: ignored
		func() error { return at(2).Delete("c") },
		func() error { return at(3).PutIf("c", []byte("d"), nil) }, // creates again
	}
	var seen []string
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i+1, err)
		}
		if err := stores[0].Barrier(); err != nil {
			t.Fatal(err)
		}
		value, _ := stores[0].Get("c")
		seen = append(seen, string(value))
	}
	return seen
}

// TestDefinitionPutIfAbsentSingleNode: a PutIf on no value creates a key
// that has none and is ignored on one that has, also at replay.
func TestDefinitionPutIfAbsentSingleNode(t *testing.T) {
	dir := t.TempDir()
	b := openTestBroker(t, dir)
	if got, want := fmt.Sprint(createSteps(t, b.Definitions())), "[a a  d]"; got != want {
		t.Fatalf("c was %s, want %s", got, want)
	}
	b.Close()
	b = openTestBroker(t, dir)
	defer b.Close()
	if value, _ := b.Definitions().Get("c"); string(value) != "d" {
		t.Fatalf("after a restart c is %q, want d", value)
	}
}

// TestDefinitionPutIfAbsentCluster: of two nodes creating a key, the
// first write applied wins on every node, and a restarted node's replay
// decides the same.
func TestDefinitionPutIfAbsentCluster(t *testing.T) {
	c := newTestCluster(t, 3)
	var stores []*DefinitionStore
	for _, id := range c.ids {
		stores = append(stores, c.broker(id).Definitions())
	}
	if got, want := fmt.Sprint(createSteps(t, stores...)), "[a a  d]"; got != want {
		t.Fatalf("c was %s, want %s", got, want)
	}
	for i, s := range stores {
		if err := s.Barrier(); err != nil {
			t.Fatal(err)
		}
		if value, _ := s.Get("c"); string(value) != "d" {
			t.Fatalf("node %d holds c = %q, want d", i+1, value)
		}
	}
	c.stop(2)
	b, err := c.restart(2)
	if err != nil {
		t.Fatal(err)
	}
	if value, _ := b.Definitions().Get("c"); string(value) != "d" {
		t.Fatalf("after a restart node 2 holds c = %q, want d", value)
	}
}
