package queuestore

import "time"

// housekeeper does the durable queues' background work on a timer (and
// sooner when many settlements are pending): writing settlements to the
// settlement logs, reclaiming settled segments of the messages logs,
// compacting settlement logs. It is the only writer of settlement logs
// while the root is open, and it runs apart from the syncer so that its
// fsyncs never delay publisher confirms.
type housekeeper struct {
	r        *Root
	interval time.Duration
	wake     chan struct{} // capacity 1
	stop     chan struct{}
	done     chan struct{}
}

func newHousekeeper(r *Root, interval time.Duration) *housekeeper {
	return &housekeeper{
		r:        r,
		interval: interval,
		wake:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
}

// soon asks for a pass before the next tick. It never blocks.
func (h *housekeeper) soon() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

func (h *housekeeper) run() {
	defer close(h.done)
	tick := time.NewTicker(h.interval)
	defer tick.Stop()
	for {
		select {
		case <-h.wake:
		case <-tick.C:
		case <-h.stop:
			return
		}
		h.pass()
	}
}

func (h *housekeeper) pass() {
	for _, st := range h.r.openStores() {
		if err := st.Housekeep(); err != nil {
			st.logger.Error("queuestore: queue housekeeping", "dir", st.dir, "err", err)
		}
	}
}

// shutdown stops the goroutine; Root.Close writes what is left.
func (h *housekeeper) shutdown() {
	close(h.stop)
	<-h.done
}
