package proto

import (
	"fmt"
	"strconv"
	"strings"
)

// AgentArgs is an agent's command line after "agent":
//
//	ftlaunch agent [NODE] [--job JOB --inc N] --connect
//
// NODE tells agents apart in ps. JOB and N, with NODE, let the agent
// register with the fence (launch/fence) as soon as it runs, before it
// reads its bootstrap: an agent whose parent's host crashed while it
// started was otherwise out of the fence's sight until the bootstrap came,
// which it never did (docs/chaos.md). None of it is secret: the
// credentials travel on stdin only.
type AgentArgs struct {
	Node    string
	Job     string
	Inc     uint64
	Connect bool // over TCP from a bootstrap on stdin (else on fd 3)
}

// Argv returns argv ("PROG agent --connect" or another agent command
// line) with a's node, job and incarnation put after "agent". An argv that
// is not an agent's, or a node or job that could be taken for a flag, is
// returned as it was.
func (a AgentArgs) Argv(argv []string) []string {
	if len(argv) < 2 || argv[1] != "agent" || strings.HasPrefix(a.Node, "-") || strings.HasPrefix(a.Job, "-") {
		return argv
	}
	out := append([]string(nil), argv[:2]...)
	if a.Node != "" {
		out = append(out, a.Node)
	}
	if a.Job != "" && a.Inc > 0 {
		out = append(out, "--job", a.Job, "--inc", strconv.FormatUint(a.Inc, 10))
	}
	return append(out, argv[2:]...)
}

// ParseAgentArgs reads an agent's command line after "agent".
func ParseAgentArgs(args []string) (AgentArgs, error) {
	var a AgentArgs
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		a.Node, args = args[0], args[1:]
	}
	for len(args) > 0 {
		switch args[0] {
		case "--connect":
			a.Connect = true
			args = args[1:]
		case "--job", "--inc":
			if len(args) < 2 {
				return a, fmt.Errorf("%s: missing value", args[0])
			}
			if args[0] == "--job" {
				a.Job = args[1]
			} else {
				n, err := strconv.ParseUint(args[1], 10, 64)
				if err != nil || n == 0 {
					return a, fmt.Errorf("--inc %q: want an incarnation (1, 2, ...)", args[1])
				}
				a.Inc = n
			}
			args = args[2:]
		default:
			return a, fmt.Errorf("unexpected argument %q (the agent is started by ftlaunch run)", args[0])
		}
	}
	if (a.Job == "") != (a.Inc == 0) {
		return a, fmt.Errorf("--job and --inc go together")
	}
	if a.Job != "" && !a.Connect {
		return a, fmt.Errorf("--job: only an agent started with --connect registers before its bootstrap")
	}
	return a, nil
}
