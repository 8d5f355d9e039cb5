package queuestore

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The clean-shutdown marker: how a restart tells which recovered messages
// may have been delivered before.

// takeCleanMarker reads and removes the clean-shutdown file. The removal is
// made durable before anything is delivered, so a crash later cannot leave
// a stale watermark behind.
func takeCleanMarker(dir string) (delivered int64, clean bool, err error) {
	path := filepath.Join(dir, cleanFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return -1, false, nil
	}
	if err != nil {
		return -1, false, err
	}
	v, perr := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err := os.Remove(path); err != nil {
		return -1, false, err
	}
	if err := syncDir(dir); err != nil {
		return -1, false, err
	}
	return v, perr == nil, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func writeCleanMarker(dir string, delivered int64) error {
	tmp := filepath.Join(dir, cleanFile+".tmp")
	if err := os.WriteFile(tmp, []byte(strconv.FormatInt(delivered, 10)+"\n"), 0o644); err != nil {
		return err
	}
	f, err := os.Open(tmp)
	if err != nil {
		return err
	}
	err = f.Sync()
	f.Close()
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, cleanFile)); err != nil {
		return err
	}
	return syncDir(dir)
}
