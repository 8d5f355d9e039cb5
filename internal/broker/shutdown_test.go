package broker

import "testing"

// TestShutdownMarkedBeforeFirstRegistration: node 1 begins its
// controlled shutdown while its first registration cannot commit (it is
// cut off from node 2, so the two have no quorum). Register stops
// retrying, and the mark is written with Register's address after the
// registration in flight: once the two meet again node 2 sees node 1 as
// shutting down, and it stays so. Started again, node 1's new
// registration clears the mark.
func TestShutdownMarkedBeforeFirstRegistration(t *testing.T) {
	c := newTestCluster(t, 2)
	stopping, other := c.broker(1), c.broker(2)
	c.isolate(1, true)
	stopping.Register("host1", 9092)
	stopping.BeginControlledShutdown()
	c.isolate(1, false)
	c.waitFor("node 2 to see node 1 shutting down", func() bool { return other.ShuttingDown(1) })

	// A registration committed after the mark would clear it; Register
	// stopped when the shutdown began, so none is.
	if err := other.meta.write(producerIDBlockKey, producerIDBlockRecord{Node: 2, Size: 1}); err != nil {
		t.Fatal(err)
	}
	if !other.ShuttingDown(1) {
		t.Fatal("node 1's registration cleared the shutdown mark written after it")
	}
	if got := other.Brokers(); len(got) != 1 || got[0].Host != "host1" || got[0].Port != 9092 {
		t.Fatalf("brokers as node 2 lists them: %+v, want node 1 at host1:9092", got)
	}

	c.stop(1)
	again, err := c.restart(1)
	if err != nil {
		t.Fatal(err)
	}
	again.Register("host1", 9092)
	c.waitFor("node 1's new registration to clear its mark", func() bool { return !other.ShuttingDown(1) })
}
