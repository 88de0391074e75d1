package bench

import "syscall"

// The kernel kills a relay when the test process dies, even by SIGKILL or
// a -timeout panic, when no cleanup runs.
func init() {
	relaySysProcAttr = func() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
}
