package main

import (
	"os/exec"
	"syscall"
)

// dieWithWatcher makes the worker die when the watcher does (killed, say),
// so no worker runs on with nobody to report its exit.
func dieWithWatcher(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
