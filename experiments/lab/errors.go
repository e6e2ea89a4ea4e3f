package lab

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"gptlab/parallel"
)

// ErrInterrupted marks a command stopped by Ctrl-C or SIGTERM (exit 130).
var ErrInterrupted = errors.New("interrupted")

// Interruptedf makes the error of an interrupted command: its text, the
// whole message the user sees, says what was saved ("interrupted at step
// 150; checkpoint saved to …").
func Interruptedf(format string, args ...any) error {
	return &interruptedError{msg: fmt.Sprintf(format, args...)}
}

// InterruptMessage is the message of the Interruptedf error in err's
// chain, if there is one.
func InterruptMessage(err error) (string, bool) {
	var in *interruptedError
	if errors.As(err, &in) {
		return in.msg, true
	}
	return "", false
}

type interruptedError struct{ msg string }

func (e *interruptedError) Error() string        { return e.msg }
func (e *interruptedError) Is(target error) bool { return target == ErrInterrupted }

// ErrInternal marks an error that is a bug (exit 3): a panic, or a job
// whose collective failed.
var ErrInternal = errors.New("internal error")

// FailedJob is the error of a job that could not complete: a rank died,
// hung or sent a malformed frame. One line, exit 3.
func FailedJob(msg string) error { return &failedJob{msg} }

type failedJob struct{ msg string }

func (e *failedJob) Error() string        { return e.msg }
func (e *failedJob) Is(target error) bool { return target == ErrInternal }

// JobError turns a collective's failure (a *parallel.Error: the same on
// every rank, naming the rank at fault) into a one-line exit 3, and a
// launched job's (a *parallel.JobError) into the failing rank's own
// status: 2 bad input, 130 interrupted, else 3.
func JobError(err error) error {
	var pe *parallel.Error
	var je *parallel.JobError
	switch {
	case errors.As(err, &pe):
		return &failedJob{err.Error()}
	case errors.As(err, &je) && je.Status == 2:
		return Usagef("%s", je.Msg)
	case errors.As(err, &je) && je.Status == 130:
		return Interruptedf("%s", je.Msg)
	case errors.As(err, &je):
		return &failedJob{je.Msg}
	}
	return err
}

// PanicError turns a panic into an internal error, printing the stack
// under GPTLAB_TRACE=1.
func PanicError(where string, p any, log io.Writer) error {
	if os.Getenv("GPTLAB_TRACE") != "" {
		fmt.Fprintf(log, "%s\n", debug.Stack())
	}
	return fmt.Errorf("%s: %w: %v (GPTLAB_TRACE=1 prints the stack)", where, ErrInternal, p)
}
