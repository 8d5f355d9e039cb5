package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// RAM-backed block devices for -cluster-devices zram: each an ext4
// filesystem on a zram device of its own. The block layer honours fsync on
// them as on a disk (the filesystem journals and flushes), but the device
// keeps its blocks, compressed, in RAM: no disk is shared and nothing
// survives a power cut. Making one needs root (zramctl, mkfs.ext4,
// mount).

const (
	clusterDevicesZram = "zram"
	// ramDiskSize is each device's size: room for a run's records of
	// one node (about 6 GB in a window at 1 GB/s); deleted topics give
	// their blocks back (mount -o discard).
	ramDiskSize = "8G"
)

// ramDisk is one mounted zram device.
type ramDisk struct {
	device string // /dev/zramN
	dir    string // where its filesystem is mounted
	// existed: zramctl found the device idle rather than adding it (the
	// module makes zram0 when it loads); it is reset but kept.
	existed bool
}

// newRAMDisks makes n RAM disks mounted at parent/0 … parent/n-1. On an
// error it removes those it made.
func newRAMDisks(parent string, n int) ([]*ramDisk, error) {
	if err := loadZram(); err != nil {
		return nil, err
	}
	var disks []*ramDisk
	for i := range n {
		d, err := newRAMDisk(filepath.Join(parent, fmt.Sprint(i)))
		if err != nil {
			return nil, errors.Join(err, removeRAMDisks(disks))
		}
		disks = append(disks, d)
	}
	return disks, nil
}

// loadZram loads the zram module unless it is loaded.
func loadZram() error {
	if _, err := os.Stat("/sys/class/zram-control"); err == nil {
		return nil
	}
	if _, err := command("modprobe", "zram"); err != nil {
		return fmt.Errorf("zram is not available: %w", err)
	}
	return nil
}

// newRAMDisk sets up a free zram device, makes an ext4 filesystem on it
// and mounts it at dir.
func newRAMDisk(dir string) (*ramDisk, error) {
	before, err := filepath.Glob("/sys/block/zram*")
	if err != nil {
		return nil, err
	}
	device, err := command("zramctl", "--find", "--size", ramDiskSize)
	if err != nil {
		return nil, err
	}
	d := &ramDisk{device: device, existed: slices.Contains(before, sysBlock(device))}
	if _, err := command("mkfs.ext4", "-q", device); err != nil {
		return nil, errors.Join(err, d.remove())
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, errors.Join(err, d.remove())
	}
	if _, err := command("mount", "-o", "discard", device, dir); err != nil {
		return nil, errors.Join(err, d.remove())
	}
	d.dir = dir
	return d, nil
}

// remove unmounts d (when mounted) and resets its zram device, which
// frees its memory; a device zramctl added is removed too, one that
// existed is left as it was found, idle.
func (d *ramDisk) remove() error {
	if d.dir != "" {
		if _, err := command("umount", d.dir); err != nil {
			return fmt.Errorf("%s stays mounted at %s: %w", d.device, d.dir, err)
		}
		d.dir = ""
	}
	if d.existed {
		return os.WriteFile(filepath.Join(sysBlock(d.device), "reset"), []byte("1"), 0)
	}
	_, err := command("zramctl", "--reset", d.device)
	return err
}

// sysBlock is the sysfs directory of a block device named by its /dev
// path.
func sysBlock(device string) string { return filepath.Join("/sys/block", filepath.Base(device)) }

// removeRAMDisks removes every disk of disks, newest first, and reports
// every failure.
func removeRAMDisks(disks []*ramDisk) error {
	var errs []error
	for i := len(disks) - 1; i >= 0; i-- {
		errs = append(errs, disks[i].remove())
	}
	return errors.Join(errs...)
}

// compression is the algorithm d compresses its blocks with, as sysfs
// names it ("lzo-rle"), or "unknown".
func (d *ramDisk) compression() string {
	b, err := os.ReadFile(filepath.Join(sysBlock(d.device), "comp_algorithm"))
	if err != nil {
		return "unknown"
	}
	return selectedAlgorithm(string(b))
}

// selectedAlgorithm picks the bracketed entry of a zram comp_algorithm
// listing ("lzo [lzo-rle] lz4").
func selectedAlgorithm(listing string) string {
	for _, f := range strings.Fields(listing) {
		if strings.HasPrefix(f, "[") && strings.HasSuffix(f, "]") {
			return strings.Trim(f, "[]")
		}
	}
	return "unknown"
}

// command runs name with args and returns its standard output, trimmed;
// an error carries its standard error.
func command(name string, args ...string) (string, error) {
	var stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}
