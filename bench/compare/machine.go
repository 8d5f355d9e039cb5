package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
)

// machine describes where the figures were measured.
type machine struct {
	cpu, kernel, memory, disk, goVersion string
	cores                                int
}

// describeMachine reads the CPU model, memory and kernel from /proc and the
// file system and device of dir from /proc/self/mountinfo.
func describeMachine(dir string) machine {
	m := machine{
		cpu:       firstField("/proc/cpuinfo", "model name"),
		cores:     runtime.NumCPU(),
		goVersion: runtime.Version(),
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.kernel = "Linux " + strings.TrimSpace(string(b))
	}
	if mem := firstField("/proc/meminfo", "MemTotal"); mem != "" {
		var kb int64
		fmt.Sscanf(mem, "%d", &kb)
		m.memory = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
	}
	m.disk = describeDisk(dir)
	return m
}

// firstField returns the value of the first "key : value" line of a /proc
// file.
func firstField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// describeDisk names the mount holding dir: file system type, device, mount
// point and size.
func describeDisk(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "unknown"
	}
	if resolved, err := filepath.EvalSymlinks(abs); err == nil {
		abs = resolved
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	var best, fsType, source string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options ... - fstype source superopts
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(tail) < 2 {
			continue
		}
		mnt := fields[4]
		if (abs == mnt || strings.HasPrefix(abs, strings.TrimSuffix(mnt, "/")+"/")) && len(mnt) >= len(best) {
			best, fsType, source = mnt, tail[0], tail[1]
		}
	}
	var st syscall.Statfs_t
	size := ""
	if syscall.Statfs(abs, &st) == nil {
		size = fmt.Sprintf(", %.0f GiB", float64(st.Blocks)*float64(st.Bsize)/(1<<30))
	}
	return fmt.Sprintf("%s on %s (mounted at %s%s)", fsType, source, best, size)
}

// openFileLimit is this process's (and so its children's) RLIMIT_NOFILE,
// soft/hard, from /proc/self/limits: the scale rows need several file
// descriptors per partition or queue.
func openFileLimit() string {
	b, err := os.ReadFile("/proc/self/limits")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Max open files"); ok {
			f := strings.Fields(rest)
			if len(f) >= 2 {
				return f[0] + " / " + f[1]
			}
		}
	}
	return "unknown"
}

// loadAverage is the 1-, 5- and 15-minute load average from /proc/loadavg:
// other work on the machine moves every figure.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// commandOutput runs a version command and returns its first line, or "".
func commandOutput(name string, args ...string) string {
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		return ""
	}
	line, _, _ := bytes.Cut(bytes.TrimSpace(out), []byte("\n"))
	return string(line)
}

// debianVersion is an installed Debian package's version, or "".
func debianVersion(pkg string) string {
	return commandOutput("dpkg-query", "-W", "-f", "${Version}", pkg)
}
