//go:build !linux

package kubecluster

import "syscall"

// sysProcAttr: only Linux can tie a child's life to its parent's; elsewhere
// the processes die by Stop (t.Cleanup) alone.
func sysProcAttr() *syscall.SysProcAttr { return nil }
