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
