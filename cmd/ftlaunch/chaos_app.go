package main

import (
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/ftlaunch/ftlaunch/chaos/harness"
)

// chaosAppCommand is `ftlaunch chaos app` (not in the help): the flags of
// the application chaos runs by default (harness.App).
func chaosAppCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ftlaunch chaos app", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	steps := fs.Int("steps", 20, "")
	interval := fs.Duration("interval", 100*time.Millisecond, "")
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "ftlaunch chaos app: %v\n", err)
		return 2
	}
	if err := harness.App(*steps, *interval, stdout); err != nil {
		fmt.Fprintf(stderr, "ftlaunch chaos app: %v\n", err)
		return 1
	}
	return 0
}
