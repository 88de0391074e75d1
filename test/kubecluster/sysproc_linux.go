package kubecluster

import "syscall"

// sysProcAttr has the kernel kill the child when the test binary dies, even
// by SIGKILL or a panic, when no cleanup runs.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
