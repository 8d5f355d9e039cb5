package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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

// TestBarrierRoundsStartAfterTheirCallers: whatever the interleaving,
// every caller of a barrier is answered by a round whose write started
// after the call began (else it would not see what was written before
// the call), and concurrent callers share rounds.
func TestBarrierRoundsStartAfterTheirCallers(t *testing.T) {
	var rounds barrierRounds
	var started atomic.Int64
	write := func() error {
		n := started.Add(1)
		time.Sleep(time.Millisecond) // a write takes a while: callers pile up
		return roundErr(n)
	}
	const callers = 64
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			before := started.Load()
			var served roundErr
			if !errors.As(rounds.await(context.Background(), write), &served) {
				t.Error("a caller got no round's answer")
				return
			}
			if int64(served) <= before {
				t.Errorf("a caller that came after round %d started was answered by round %d", before, served)
			}
		})
	}
	wg.Wait()
	t.Logf("%d callers, %d writes", callers, started.Load())
}

// TestBarrierRoundsCallerLeavesByItsContext: a caller whose context
// ends while it waits for its round (a handshake's deadline, on a node
// cut off from the metadata quorum, where a round lasts the metadata
// write timeout) returns then, with its context's cause, and the round
// under way goes on for the caller that joined it.
func TestBarrierRoundsCallerLeavesByItsContext(t *testing.T) {
	var rounds barrierRounds
	writing, release := make(chan struct{}, 2), make(chan struct{})
	var written atomic.Int64
	write := func() error {
		writing <- struct{}{}
		<-release
		return roundErr(written.Add(1))
	}
	patient := make(chan error, 1)
	go func() { patient <- rounds.await(context.Background(), write) }()
	<-writing // the patient caller's round is under way: the next caller waits for the next

	deadline := errors.New("handshake deadline")
	ctx, cancel := context.WithTimeoutCause(context.Background(), 10*time.Millisecond, deadline)
	defer cancel()
	if err := rounds.await(ctx, write); !errors.Is(err, deadline) {
		t.Errorf("a caller whose context ended got %v, want its cause", err)
	}
	close(release)
	if err := <-patient; !errors.Is(err, roundErr(1)) {
		t.Errorf("the caller that stayed got %v, want the first round's answer", err)
	}
}

// roundErr is the answer of the n-th barrier write.
type roundErr int64

func (e roundErr) Error() string { return fmt.Sprint("round ", int64(e)) }
