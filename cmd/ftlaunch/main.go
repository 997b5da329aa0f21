// Command ftlaunch is a fault-tolerant parallel job launcher.
//
//	ftlaunch run [flags] PROGRAM [ARGS...]   run a parallel job
//	ftlaunch plan [flags]                    show a launch tree and its modeled time
//	ftlaunch inspect [flags] [STATE]         read a job's state log: timeline, node table, raft
//	ftlaunch status [flags] [JOB]            print a job's state once
//	ftlaunch attach [flags] [JOB]            follow a job that lost its front-end
//	ftlaunch jobs [flags]                    list the jobs of the state directory
//	ftlaunch cancel [flags] JOB              end a running job
//	ftlaunch kill [--signal SIG] JOB         signal every rank of a running job
//	ftlaunch chaos --cluster test-nodes ...  run jobs under seeded faults and check the outcome
//	ftlaunch version                         print the version
//
// `ftlaunch agent` is internal: the front-end starts it, one per node.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/ftlaunch/ftlaunch/chaos/ringapp"
	"github.com/ftlaunch/ftlaunch/launch/fence"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

const usage = `ftlaunch: a fault-tolerant parallel job launcher

Usage:
  ftlaunch run [flags] PROGRAM [ARGS...]   run PROGRAM as a parallel job (see: ftlaunch run --help)
  ftlaunch plan [flags]                    show a launch tree and its modeled launch time
  ftlaunch inspect [flags] [STATE]         read a job's state log: timeline, node table, raft metadata
  ftlaunch status [flags] [JOB]            print a job's state once (running, finished, exit code)
  ftlaunch attach [flags] [JOB]            follow the output of a job that lost its front-end,
                                           exit with its exit code
  ftlaunch jobs [flags]                    list the jobs of the state directory, newest first
  ftlaunch cancel [flags] JOB              end a running job (wherever its root runs now)
  ftlaunch kill [--signal SIG] JOB         send a signal to every rank of a running job
  ftlaunch chaos --cluster test-nodes ...  run jobs under seeded faults, check every invariant
  ftlaunch ringapp [flags]                 the recovery demo application: run it as a job's program
                                           (ftlaunch run --restart rank -n 8 ftlaunch ringapp)
  ftlaunch version                         print the version
  ftlaunch help COMMAND                    print a command's help (ftlaunch help run)
`

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func dispatch(args []string, stdin *os.File, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "run":
		return runCommand(args[1:], stdin, stdout, stderr)
	case "plan":
		return planCommand(args[1:], stdout, stderr)
	case "inspect":
		return inspectCommand(args[1:], stdout, stderr)
	case "status":
		return statusCommand(args[1:], stdout, stderr)
	case "attach":
		return attachCommand(args[1:], stdout, stderr)
	case "jobs":
		return jobsCommand(args[1:], stdout, stderr)
	case "cancel":
		return cancelCommand(args[1:], stdout, stderr)
	case "kill":
		return killCommand(args[1:], stdout, stderr)
	case "chaos":
		return chaosCommand(args[1:], stdout, stderr)
	case "agent":
		return agentCommand(args[1:], stdout, stderr)
	case "ringapp": // the recovery application, for tests and demos
		return ringapp.Main(args[1:], stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintf(stdout, "ftlaunch %s\n", version)
		return 0
	case "help", "--help", "-help", "-h":
		if len(args) > 1 && args[0] == "help" && args[1] != "agent" {
			// ftlaunch help run: that command's own help.
			return dispatch([]string{args[1], "--help"}, stdin, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "ftlaunch: unknown command %q (try: ftlaunch help)\n", args[0])
	return 2
}

// detach returns how the front-end of a replicated job leaves it on
// SIGHUP: it says so and exits at once with 129 (128 + SIGHUP), as if it
// were lost; a root replica carries on.
func detach(stderr io.Writer) func(jobID string) {
	return func(jobID string) {
		fmt.Fprintf(stderr, "ftlaunch: SIGHUP: the front-end leaves; job %s goes on under a root replica (follow it: ftlaunch attach %s)\n", jobID, jobID)
		os.Exit(128 + 1)
	}
}

func agentCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "--fence" {
		return fenceCommand(args[1:], stdout, stderr)
	}
	// ftlaunch agent [NODE] [--job JOB --inc N] --connect (proto.AgentArgs).
	return launchAgentMain(context.Background(), args, stderr)
}

// fenceCommand is `ftlaunch agent --fence JOB NODE INCARNATION`, which a
// root runs on a node whose agent it declared lost: it kills that agent
// (incarnations up to INCARNATION) and the ranks it started there
// (launch/fence).
func fenceCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) != 3 {
		fmt.Fprintf(stderr, "ftlaunch agent --fence: want JOB NODE INCARNATION, got %q\n", args)
		return 2
	}
	inc, err := strconv.ParseUint(args[2], 10, 64)
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch agent --fence: incarnation %q: not a number\n", args[2])
		return 2
	}
	res, err := fence.Kill(fence.Target{Job: args[0], Node: args[1], UpTo: inc})
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch agent --fence: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, res) // what it killed: its caller names the job, node and incarnation
	return 0
}
