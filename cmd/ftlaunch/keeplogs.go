package main

import (
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/ftlaunch/ftlaunch/launch/journal"
)

// keepLogsEnv sets how many job logs the default state directory keeps
// when --keep-logs is not given.
const keepLogsEnv = "FTLAUNCH_KEEP_LOGS"

// pruneLogs removes the oldest job logs of the default state directory
// after a job's end, keeping --keep-logs (or $FTLAUNCH_KEEP_LOGS, or
// journal.DefaultKeep) of them. A state directory given with --state-dir
// is the user's to manage: it is never pruned. Problems are warnings: the
// job's exit status stands.
func pruneLogs(f *runFlags, stderr io.Writer) {
	if f.stateDir != "" {
		return
	}
	keep := f.keepLogs
	if keep < 0 {
		keep = journal.DefaultKeep
		if s := os.Getenv(keepLogsEnv); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 {
				fmt.Fprintf(stderr, "ftlaunch: %s=%q: want a number of job logs (0: keep all); keeping %d\n", keepLogsEnv, s, keep)
			} else {
				keep = n
			}
		}
	}
	if keep == 0 {
		return
	}
	dir, err := journal.DefaultStateDir()
	if err != nil {
		return // no state directory: nothing was written
	}
	if _, err := os.Stat(dir); err != nil {
		return
	}
	if _, err := journal.Prune(dir, keep); err != nil {
		fmt.Fprintf(stderr, "ftlaunch: pruning old job logs: %v\n", err)
	}
}
