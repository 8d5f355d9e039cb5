package seglog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Small files beside the segments.
const (
	recoveryPointFile = "recovery-point"          // decimal offset below which every byte is known fsynced
	startOffsetFile   = "log-start-offset"        // decimal log start offset (DeleteRecords, retention)
	cleanShutdownFile = "clean-shutdown"          // present only between Close and the next Open
	epochFile         = "leader-epoch-checkpoint" // the leader epoch index (epochs.go)
	tempSuffix        = ".tmp"
)

// writeOffsetFile replaces dir/name with the decimal offset (see
// writeSmallFile).
func writeOffsetFile(dir, name string, offset int64, syncDirAfter bool) error {
	return writeSmallFile(dir, name, []byte(strconv.FormatInt(offset, 10)+"\n"), syncDirAfter)
}

// writeSmallFile replaces dir/name with content: write a temp file, fsync
// it, rename it over the old one. With syncDir the directory is fsynced
// too, so the rename itself survives a crash; without it a crash may bring
// back the previous content (fine for the recovery point, which only makes
// the next recovery scan longer).
func writeSmallFile(dir, name string, content []byte, syncDirAfter bool) error {
	path := filepath.Join(dir, name)
	tmp := path + tempSuffix
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(content)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil && syncDirAfter {
		err = syncDir(dir)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("seglog: write %s: %w", name, err)
	}
	return nil
}

// readOffsetFile returns the offset stored in dir/name, or ok=false if the
// file does not exist.
func readOffsetFile(dir, name string) (offset int64, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	offset, err = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || offset < 0 {
		return 0, false, fmt.Errorf("seglog: %s holds %q, not an offset", name, b)
	}
	return offset, true, nil
}

// writeMarker creates the clean-shutdown marker durably.
func writeMarker(dir string) error {
	f, err := os.OpenFile(filepath.Join(dir, cleanShutdownFile), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = syncDir(dir)
	}
	return err
}

// missingDirs returns dir and those of its ancestors that do not exist,
// nearest first: the directories a MkdirAll of dir would create.
func missingDirs(dir string) ([]string, error) {
	var missing []string
	for d := filepath.Clean(dir); ; {
		_, err := os.Stat(d)
		if err == nil {
			return missing, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		missing = append(missing, d)
		parent := filepath.Dir(d)
		if parent == d {
			return missing, nil
		}
		d = parent
	}
}

// dirsToSync lists the directories to fsync so that a log in dir is found
// after a crash: dir itself (its files' entries), its parent (dir's entry)
// and the parent of each directory in created.
func dirsToSync(dir string, created []string) []string {
	dir = filepath.Clean(dir)
	dirs := []string{dir, filepath.Dir(dir)}
	for _, c := range created {
		if p := filepath.Dir(c); !slices.Contains(dirs, p) {
			dirs = append(dirs, p)
		}
	}
	return dirs
}

// listSegmentBases returns the base offsets of the dir's .log files in
// order, removing index files whose .log is gone and temp files left by an
// interrupted writeOffsetFile.
func listSegmentBases(dir string) ([]int64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	logs := map[int64]bool{}
	var orphans []string
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, tempSuffix):
			orphans = append(orphans, name)
		case strings.HasSuffix(name, logSuffix):
			if base, ok := parseSegmentName(name, logSuffix); ok {
				logs[base] = true
			}
		}
	}
	for _, e := range entries {
		name := e.Name()
		for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
			if base, ok := parseSegmentName(name, suffix); ok && !logs[base] {
				orphans = append(orphans, name)
			}
		}
	}
	for _, name := range orphans {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	bases := make([]int64, 0, len(logs))
	for b := range logs {
		bases = append(bases, b)
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	return bases, nil
}

// parseSegmentName parses "<20 digits><suffix>".
func parseSegmentName(name, suffix string) (int64, bool) {
	digits, ok := strings.CutSuffix(name, suffix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	base, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || base < 0 {
		return 0, false
	}
	return base, true
}

func fileExists(path string) (bool, error) {
	_, err := os.Stat(path)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return false, err
}

// readFileIfExists is os.ReadFile with a missing file read as empty.
func readFileIfExists(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return b, err
}
