//go:build !linux

package bench

import (
	"errors"
	"time"
)

// ProcessCPU is measured on Linux only (/proc).
func ProcessCPU(pids ...int) (time.Duration, error) {
	return 0, errors.New("the CPU time of other processes is measured on Linux only")
}

// ProcessMemory is measured on Linux only (/proc).
func ProcessMemory(pid int) (Memory, error) {
	return Memory{}, errors.New("the memory of other processes is measured on Linux only")
}
