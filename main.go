// Command gptlab runs the labs of the chapter "Memory Planning, Precision,
// and Distributed Execution" on a small GPT and prints their reports.
// The commands are in package experiments/cli; this file only calls it.
package main

import (
	"os"

	_ "go4.org/unsafe/assume-no-moving-gc" // gorgonia panics at start on Go 1.26 without it

	"gptlab/experiments/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
