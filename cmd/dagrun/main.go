// Command dagrun plans, checks and runs declarative CUDA-stream pipelines.
//
//	dagrun plan   SPEC [--json | --format table|json|dot] [--strategy S] [--max-streams N]
//	dagrun check  SPEC | --plan FILE
//	dagrun run    SPEC | --plan FILE [--backend auto|sim|cuda] [--mode streams|graph] [--alloc static|dynamic] [--iterations N] [--frames DIR]
//	dagrun import GRAPH.json [-o SPEC]
//	dagrun bench  plan|memory SPEC...
//
// It does all its work through the root package dagrun (the embedded Go
// API). Flags that contradict each other are rejected before anything is
// loaded. Exit codes: 0 ok, 1 a race was found, a run failed or stdout
// was closed, 2 bad input or usage, 3 an internal error (a crash: a panic,
// the runtime out of memory, the process killed), 128+N stopped by signal
// N (130 an interrupt, Ctrl-C; 143 a termination; 129 a hangup; 131 a
// quit), as shells report it; on exit 2 and 3 nothing is written to stdout
// (check --json prints its input's errors there as JSON), and no command
// leaves a partial output file.
//
// Crashes are told apart by a watcher: dagrun runs the command in a child
// process of its own binary, whose Go runtime reports a crash on a pipe
// (runtime/debug.SetCrashOutput); the parent turns it into the one line
// "dagrun: internal error: please report: …" and exit 3, and removes the
// output files the child had staged.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unicode"

	// The video demo's kernels have Go bodies for the simulator; registering
	// them lets `dagrun run --backend sim specs/video/cameras.yaml` compute
	// real outputs instead of opaque mix stages.
	_ "github.com/dagrun/dagrun/specs/video"
)

func main() {
	if os.Getenv(workerEnv) == "" {
		os.Exit(watch())
	}
	// Fd 2 carries only what the runtime itself writes there (a crash
	// dump, which the watcher drops for its one line); the command's own
	// messages go to the watcher's stderr, passed as fd 5.
	os.Stderr = os.NewFile(5, "stderr")
	crash := os.NewFile(3, "crash")
	debug.SetCrashOutput(crash, debug.CrashOptions{})
	crash.Close()
	stagedTo = os.NewFile(4, "staged")
	switch os.Getenv("DAGRUN_TEST_CRASH") { // the crash tests' faults (outputs_test.go: TestCrashExit3)
	case "panic":
		go func() { panic("dagrun: test crash") }()
		select {}
	case "oom": // the runtime cannot map 64 TiB: "fatal error: runtime: out of memory"
		b := make([]byte, 1<<46)
		b[len(b)-1] = 1
		fmt.Println(len(b))
	}
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, stopSignals...)
	go stopOn(sigs, cancel)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	os.Exit(exitCode(err, os.Stderr))
}

// stopSignals end a command early, in whatever phase (stopOn): nothing
// staged is kept, and the exit code is 128 + the signal's number
// (signalExit).
var stopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// What a stop signal does to the worker's command (phase holds one):
const (
	// phaseWork: loading, planning, verifying, staging output files, none
	// of which watch the context: the worker removes its staging folders
	// and exits at once.
	phaseWork int32 = iota
	// phaseWatch: a run (dagrun.Run), which watches the context: it is
	// cancelled, and the run stops itself at its next iteration and says
	// where, or stopOn ends it after stopGrace.
	phaseWatch
	// phaseOutput: the command commits its files and prints its output
	// (beginOutput): it finishes.
	phaseOutput
	// phaseStopped: stopOn is ending the process.
	phaseStopped
)

var phase atomic.Int32

// stopOn waits for the first stop signal, keeps it (stoppedBy), cancels
// the command's context and, while the command is in phaseWork, ends the
// process at once (exit signalExit) with its staging folders removed.
func stopOn(sigs <-chan os.Signal, cancel func()) {
	sig := <-sigs
	stoppedBy.Store(&sig)
	cancel()
	if phase.CompareAndSwap(phaseWork, phaseStopped) {
		removeStaged()
		fmt.Fprintln(os.Stderr, "dagrun:", errStopped)
		os.Exit(signalExit(sig))
	}
	// A run stops itself between iterations; one whose iteration goes on
	// (ops that take long, a long plan) is ended after stopGrace.
	time.Sleep(stopGrace)
	if phase.CompareAndSwap(phaseWatch, phaseStopped) || phase.CompareAndSwap(phaseWork, phaseStopped) {
		removeStaged()
		fmt.Fprintln(os.Stderr, "dagrun: stopped during an iteration of the run by an interrupt or termination: nothing written")
		os.Exit(signalExit(sig))
	}
}

// stopGrace is how long a stop signal lets a run stop itself.
const stopGrace = time.Second

// stoppedBy is the stop signal the worker received, nil before one.
var stoppedBy atomic.Pointer[os.Signal]

// signalExit is the exit code of a command stopped by sig: 128 + its
// number, as shells report a process that a signal ended (130 for an
// interrupt), so that a script tells a stopped run from a failed one.
func signalExit(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return exitFailure
}

// watching marks a run that watches ctx (phaseWatch) and returns the
// function that ends the mark.
func watching() func() {
	if !phase.CompareAndSwap(phaseWork, phaseWatch) && phase.Load() == phaseStopped {
		select {} // stopOn is ending the process
	}
	return func() { phase.CompareAndSwap(phaseWatch, phaseWork) }
}

// beginOutput is stopped, asked right before a command commits its files
// or prints its output; from then on a stop signal lets it finish
// (phaseOutput), so that its output is whole or not there at all.
func beginOutput(ctx context.Context) error {
	if err := stopped(ctx); err != nil {
		return err
	}
	if !phase.CompareAndSwap(phaseWork, phaseOutput) && phase.Load() == phaseStopped {
		select {} // stopOn is ending the process
	}
	return nil
}

// workerEnv marks the child process that runs the command.
const workerEnv = "DAGRUN_WORKER"

// stagedTo, in the worker, receives the path of every staging folder
// outFiles creates, one per line, so that the watcher can remove them
// after a crash; nil in tests.
var stagedTo *os.File

// watch runs the command in a worker process (this binary, workerEnv set)
// and returns its exit code, or exitInternal with one line on stderr when
// the worker crashed: its runtime wrote a crash report, or a signal (the
// kernel's out-of-memory killer) ended it. Interrupts reach the worker
// (the terminal sends them to both); the watcher waits for it.
func watch() int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "dagrun: internal error: please report: cannot find the dagrun binary: %v\n", err)
		return exitInternal
	}
	crashR, crashW, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(os.Stderr, "dagrun: internal error: please report: %v\n", err)
		return exitInternal
	}
	stagedR, stagedW, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(os.Stderr, "dagrun: internal error: please report: %v\n", err)
		return exitInternal
	}
	var runtimeOut strings.Builder // the worker's fd 2: the runtime's own writes
	cmd := exec.Command(exe, os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, &limitedWriter{w: &runtimeOut, n: 1 << 20}
	cmd.ExtraFiles = []*os.File{crashW, stagedW, os.Stderr}
	cmd.Env = append(os.Environ(), workerEnv+"=1")
	runtime.LockOSThread() // the parent-death signal follows the thread that started the worker: keep it
	dieWithWatcher(cmd)
	// A stop signal sent to this process alone (kill, a supervisor) is
	// passed on to the worker, which stops (stopOn) and removes its staged
	// outputs; one from the terminal reaches both. A run stops at the end
	// of the op it is in; a second signal ends the worker at once.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, stopSignals...)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "dagrun: internal error: please report: starting the worker: %v\n", err)
		return exitInternal
	}
	var killed atomic.Bool // by a second interrupt
	var firstSig atomic.Pointer[os.Signal]
	go func() {
		first := true
		for sig := range sigs {
			if first {
				first = false
				firstSig.Store(&sig)
				cmd.Process.Signal(sig)
				fmt.Fprintf(os.Stderr, "dagrun: %v: stopping (a second one stops at once)\n", sig)
				continue
			}
			killed.Store(true)
			cmd.Process.Kill()
		}
	}()
	crashW.Close()
	stagedW.Close()
	var staged []string
	done := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stagedR)
		for sc.Scan() {
			staged = append(staged, sc.Text())
		}
		close(done)
	}()
	report, _ := io.ReadAll(io.LimitReader(crashR, 1<<20))
	werr := cmd.Wait()
	<-done
	state := cmd.ProcessState
	// What the worker staged and left: none unless it crashed or was
	// killed (it removes its own when it ends, however a signal ends it).
	for _, dir := range staged {
		os.RemoveAll(dir)
	}
	if len(report) == 0 && (werr == nil || state.Exited()) {
		io.WriteString(os.Stderr, runtimeOut.String()) // a library's message, say
		return state.ExitCode()
	}
	if killed.Load() && len(report) == 0 {
		fmt.Fprintln(os.Stderr, "dagrun: stopped at the second interrupt; no output file was written, and what it printed is incomplete")
		return signalExit(*firstSig.Load())
	}
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && len(report) == 0 && ws.Signaled() && ws.Signal() == syscall.SIGPIPE {
		// The reader of stdout went away (`| dot` without Graphviz, `| head`):
		// no crash, a failed write to stdout.
		fmt.Fprintln(os.Stderr, "dagrun: stdout was closed by the program reading it (broken pipe); the output is incomplete")
		return exitFailure
	}
	if os.Getenv("GOTRACEBACK") != "" { // asked for: the whole report
		os.Stderr.Write(report)
	}
	why := ""
	for _, line := range strings.Split(runtimeOut.String()+"\n"+string(report), "\n") {
		if strings.HasPrefix(line, "panic: ") || strings.HasPrefix(line, "fatal error: ") {
			why = line
			break
		}
	}
	if why == "" && len(report) > 0 {
		why = "the Go runtime reported a crash (set GOTRACEBACK=all to see it)"
	}
	if why == "" {
		why = fmt.Sprintf("the worker process was ended by %v (the system's out-of-memory killer?)", state)
	}
	fmt.Fprintf(os.Stderr, "dagrun: internal error: please report: %s\n", why)
	return exitInternal
}

// stopped is the error of a command whose context a stop signal cancelled
// (stopSignals), asked between steps of its work: a run stopped by one
// returns its own error.
func stopped(ctx context.Context) error {
	if ctx.Err() == nil {
		return nil
	}
	return failure{errStopped}
}

var errStopped = errors.New("stopped by an interrupt or termination: nothing written")

// Exit codes (and 128+N for a command stopped by signal N: signalExit).
const (
	exitOK       = 0
	exitFailure  = 1 // a race, a failed run, a closed stdout
	exitUsage    = 2 // bad input: usage, spec or plan errors
	exitInternal = 3 // a crash: a panic, out of memory (told apart by watch)
)

// usageError marks bad input: exit 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// exitCode prints err (if any) and maps it to the process exit code: a
// command that a stop signal ended with an error (a stopped run, output
// not written) exits signalExit.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(stderr, "dagrun:", printable(err.Error()))
	if sig := stoppedBy.Load(); sig != nil {
		return signalExit(*sig)
	}
	var ue usageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	return exitFailure
}

// printable is s with every character a terminal would act on or hide
// (controls other than newline and tab, format characters such as bidi
// overrides) written as its Go escape (\x1b, \u202e): a path or a name in
// a message never reaches the terminal as an escape sequence.
func printable(s string) string {
	ok := func(r rune) bool { return r == '\n' || r == '\t' || unicode.IsPrint(r) }
	if !strings.ContainsFunc(s, func(r rune) bool { return !ok(r) }) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if ok(r) {
			b.WriteRune(r)
			continue
		}
		q := strconv.QuoteRune(r)
		b.WriteString(q[1 : len(q)-1])
	}
	return b.String()
}

// limitedWriter keeps the first n bytes written to it and drops the rest.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	k := min(len(p), l.n)
	l.w.Write(p[:k])
	l.n -= k
	return len(p), nil
}
