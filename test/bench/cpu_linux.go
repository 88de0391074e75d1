package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ProcessCPU returns the CPU time the processes pids have used so far: the
// sum over every thread of its time on a CPU, in nanoseconds, from
// /proc/<pid>/task/<tid>/schedstat (a thread that has exited no longer
// counts; Go's runtime keeps its threads).
func ProcessCPU(pids ...int) (time.Duration, error) {
	var total time.Duration
	for _, pid := range pids {
		tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
		if err != nil {
			return 0, err
		}
		if len(tasks) == 0 {
			return 0, fmt.Errorf("process %d: no /proc/%d/task/*/schedstat (gone?)", pid, pid)
		}
		for _, path := range tasks {
			data, err := os.ReadFile(path)
			if err != nil {
				if os.IsNotExist(err) || strings.Contains(err.Error(), "no such process") {
					continue // the thread has just exited
				}
				return 0, err
			}
			field, _, _ := strings.Cut(string(data), " ")
			ns, err := strconv.ParseInt(field, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: %q: %w", path, data, err)
			}
			total += time.Duration(ns)
		}
	}
	return total, nil
}

// ProcessMemory returns a process's resident memory.
func ProcessMemory(pid int) (Memory, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Memory{}, err
	}
	return parseMemory(string(data))
}
