package broker

import (
	"errors"
	"fmt"
	"testing"
)

// TestDefinitionFollowers: a follower first hears of the live keys under
// its prefix, in key order, then of every change under it before the
// change's Put or Delete returns, in order (nil: deleted); followers of
// other prefixes hear nothing of it; a follower whose replay fails is not
// registered; a watcher stopped with nil hears nothing more.
func TestDefinitionFollowers(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	defer b.Close()
	defs := b.Definitions()
	mustPut := func(key, value string) {
		t.Helper()
		if err := defs.Put(key, []byte(value)); err != nil {
			t.Fatal(err)
		}
	}
	mustPut("users/b", "1")
	mustPut("users/a", "2")
	mustPut("acl/x", "3")

	var heard []string
	err := defs.Follow("users/", func(key string, value []byte) error {
		if value == nil {
			heard = append(heard, key+" deleted")
		} else {
			heard = append(heard, key+"="+string(value))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var watched []string
	defs.Watch("acl/", func(key string) { watched = append(watched, key) })

	mustPut("users/a", "4")
	mustPut("acl/y", "5")
	if err := defs.Delete("users/b"); err != nil {
		t.Fatal(err)
	}
	defs.Watch("acl/", nil)
	mustPut("acl/z", "6")
	if got, want := fmt.Sprint(heard), "[users/a=2 users/b=1 users/a=4 users/b deleted]"; got != want {
		t.Errorf("the users/ follower heard %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(watched), "[acl/y]"; got != want {
		t.Errorf("the acl/ watcher heard %s, want %s", got, want)
	}

	bad := errors.New("bad record")
	calls := 0
	if err := defs.Follow("acl/", func(string, []byte) error { calls++; return bad }); !errors.Is(err, bad) {
		t.Fatalf("Follow with a failing replay: %v", err)
	}
	mustPut("acl/w", "7")
	if calls != 1 {
		t.Errorf("a follower whose replay failed was called %d times, want once (registered anyway?)", calls)
	}
}
