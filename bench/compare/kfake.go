package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// kfakeMode says how the kfake peer keeps data. kfake is franz-go's test
// double, made to run inside a test's process, not a production broker: one
// goroutine handles every request of every connection. With a data
// directory (as here) it appends each batch to a segment file, keeps only a
// per-batch index in memory, and answers fetches by reading the batches
// back from the segment files; with SyncWrites it fsyncs (a full fsync, not
// fdatasync) the segment file and then the index file after every batch,
// before answering the produce request, with no group commit.
type kfakeMode struct {
	name string // shown in the table
	sync bool
}

var (
	kfakeSynced = kfakeMode{name: "kfake (franz-go's in-process test double, SyncWrites)", sync: true}
	kfakeCached = kfakeMode{name: "kfake (franz-go's in-process test double, page cache)", sync: false}
)

// kfakeSyncedNote says what the SyncWrites peer does per batch, for the
// rows that set it against Wharf's acks=all.
const kfakeSyncedNote = "kfake with SyncWrites: two fsyncs (segment, then index file) per batch in its one request goroutine, no group commit"

// kfakeServer is the kfake runner: this same program re-executed with
// -kfake-serve, so kfake runs in its own process like every other server
// and its memory and files can be measured.
type kfakeServer struct {
	*child
	addr string
	dir  string // its data directory
	mode kfakeMode
}

// startKfake re-executes this program as a kfake broker on a free loopback
// port with its data in dir.
func (s *suite) startKfake(ctx context.Context, mode kfakeMode, dir string) (*kfakeServer, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	args := []string{"-kfake-serve", "-kfake-dir", dir, "-kfake-port", strconv.Itoa(port)}
	if mode.sync {
		args = append(args, "-kfake-sync")
	}
	k := &kfakeServer{addr: loopback(port), dir: dir, mode: mode}
	k.child, err = s.procs.start("kfake", exec.Command(self, args...), filepath.Join(s.work, "kfake.log"))
	if err != nil {
		return nil, err
	}
	if err := waitForTCP(ctx, k.child, k.addr, 5*time.Minute); err != nil {
		k.terminate(10 * time.Second)
		return nil, err
	}
	return k, nil
}

// serveKfake is the body of the -kfake-serve child: one kfake broker on
// 127.0.0.1:port persisting to dir until SIGTERM or SIGINT, then a clean
// Close (which flushes and closes its files).
func serveKfake(dir string, port int, sync bool) error {
	opts := []kfake.Opt{kfake.Ports(port), kfake.DataDir(dir)}
	if sync {
		opts = append(opts, kfake.SyncWrites())
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return err
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	fmt.Println("kfake listening on", c.ListenAddrs())
	<-stop
	c.Close()
	return nil
}

// moduleVersion is the version of module path linked into this program.
func moduleVersion(path string) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	for _, d := range info.Deps {
		if d.Path == path {
			if d.Replace != nil {
				return d.Replace.Version
			}
			return d.Version
		}
	}
	return "unknown"
}
