package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// memory is a process's resident memory in MB (10^6 bytes) as the kernel
// reports it in /proc/<pid>/status: HWM is the peak (VmHWM), RSS the
// current (VmRSS).
type memory struct {
	HWM, RSS float64
}

// readMemory reads VmHWM and VmRSS of pid.
func readMemory(pid int) (memory, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memory{}, fmt.Errorf("read memory of %d: %w", pid, err)
	}
	defer func() { _ = f.Close() }()
	var m memory
	var found int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || (name != "VmHWM" && name != "VmRSS") {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 64)
		if err != nil {
			return memory{}, fmt.Errorf("read memory of %d: %s: %w", pid, name, err)
		}
		if name == "VmHWM" {
			m.HWM = kb * 1024 / 1e6
		} else {
			m.RSS = kb * 1024 / 1e6
		}
		found++
	}
	if err := sc.Err(); err != nil {
		return memory{}, fmt.Errorf("read memory of %d: %w", pid, err)
	}
	if found != 2 {
		return memory{}, fmt.Errorf("read memory of %d: VmHWM/VmRSS not in /proc status", pid)
	}
	return m, nil
}
