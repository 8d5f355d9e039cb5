package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// residentMiB is a process's resident set (VmRSS in /proc/<pid>/status) in
// MiB.
func residentMiB(pid int) (float64, error) {
	// The field reads "123456 kB".
	field := firstField(fmt.Sprintf("/proc/%d/status", pid), "VmRSS")
	num, _, _ := strings.Cut(field, " ")
	kb, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("VmRSS of pid %d: %q", pid, field)
	}
	return kb / 1024, nil
}

// openFiles is the number of file descriptors a process holds (files,
// sockets, pipes), from /proc/<pid>/fd.
func openFiles(pid int) (float64, error) {
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, err
	}
	return float64(len(entries)), nil
}

// clockTicks is USER_HZ, the unit of the times in /proc/<pid>/stat; Linux
// fixes it at 100 for user space.
const clockTicks = 100

// processCPUSeconds is the user+system CPU time of a process, from
// /proc/<pid>/stat (fields 14 and 15, counted after the command name, which
// may contain spaces).
func processCPUSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	_, rest, ok := strings.Cut(string(b), ") ")
	if !ok {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	// rest starts at field 3 (state); utime and stime are fields 14, 15.
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad times", pid)
	}
	return (utime + stime) / clockTicks, nil
}
