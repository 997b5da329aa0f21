// Command ftbench compares launchers side by side on the same inputs:
// ftlaunch against MPICH's mpiexec, runs interleaved so that both see the
// same machine load, with medians and ratios. It also times ftlaunch's
// startup — from `ftlaunch run` until every rank holds the node table —
// with the demo application.
//
//	ftbench -ftlaunch bin/ftlaunch -ftdemo bin/ftdemo [-runs 11] [-sizes 1,4,16,64,256]
//	        [-baseline OLD-FTLAUNCH] [-replicas "--replicas 3 --test-nodes 4"]
//
// The comparison with mpiexec prints, for every rank count, each
// command's median, p25 and p75 and its ratio to mpiexec measured in the
// same rounds; then the same with the state log on three replicas, beside
// ftlaunch without --replicas on the same test nodes. The machine's load
// averages are printed before and after.
//
// It prints Markdown tables (the form docs/benchmarks.md keeps).
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	ftl := flag.String("ftlaunch", "bin/ftlaunch", "the ftlaunch binary")
	demo := flag.String("ftdemo", "bin/ftdemo", "the demo application")
	mpiexec := flag.String("mpiexec", "mpiexec.mpich", "MPICH's mpiexec (empty: skip the comparison)")
	runs := flag.Int("runs", 11, "runs of each command")
	sizes := flag.String("sizes", "1,4,16,64,256", "rank counts")
	baseline := flag.String("baseline", "", "an older ftlaunch to time beside -ftlaunch (before and after a change)")
	agentProcess := flag.Bool("agent-process", false, "also time ftlaunch with its local agent as a process of its own (FTLAUNCH_AGENT_INPROCESS=0; it runs in the front-end's process by default)")
	replicas := flag.String("replicas", "--replicas 3 --test-nodes 4", "ftlaunch run flags of the replicated comparison, space-separated (empty: skip it)")
	extra := flag.String("args", "", "extra ftlaunch run flags, space-separated (e.g. \"--test-nodes 4\")")
	hostfile := flag.String("hostfile", "", "compare across these hosts (lines host:slots) instead of on this machine")
	sshConfig := flag.String("ssh-config", "", "OpenSSH config for the hosts (with -hostfile)")
	bridge := flag.String("iface", "", "network interface the hosts reach this machine on (Hydra's -iface, with -hostfile)")
	ppn := flag.Int("ppn", 4, "ranks per host (with -hostfile)")
	trees := flag.String("trees", "", "with -hostfile: ftlaunch --tree kinds to compare, comma-separated (empty: the default)")
	program := flag.String("cmd", "true", "the program (and arguments) both launchers run in the comparison")
	flag.Parse()
	prog := strings.Fields(*program)
	if len(prog) == 0 {
		fmt.Fprintln(os.Stderr, "ftbench: -cmd is empty")
		os.Exit(2)
	}
	ns, err := parseSizes(*sizes)
	if err != nil {
		fmt.Fprintf(os.Stderr, "ftbench: -sizes: %v\n", err)
		os.Exit(2)
	}
	if *runs < 1 {
		fmt.Fprintln(os.Stderr, "ftbench: -runs must be at least 1")
		os.Exit(2)
	}
	if *hostfile != "" {
		err = runHosts(*ftl, *mpiexec, *runs, *hostfile, *sshConfig, *bridge, *ppn, strings.FieldsFunc(*trees, func(r rune) bool { return r == ',' }), strings.Fields(*extra), prog)
	} else {
		err = run(*ftl, *demo, *mpiexec, *baseline, *agentProcess, *runs, ns, strings.Fields(*extra), strings.Fields(*replicas), prog)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "ftbench: %v\n", err)
		os.Exit(1)
	}
}

// runHosts compares a whole run of `true` on every host of hostfile:
// ftlaunch over its SSH spawner against Hydra over OpenSSH, with Hydra's
// default key exchange and again restricted to curve25519.
func runHosts(ftl, mpiexec string, runs int, hostfile, sshConfig, iface string, ppn int, trees, extra, prog []string) error {
	b, err := os.ReadFile(hostfile)
	if err != nil {
		return err
	}
	hosts := len(strings.Fields(string(b)))
	n := hosts * ppn
	dir, err := os.MkdirTemp("", "ftbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	wrap := func(name, opts string) (string, error) {
		p := dir + "/" + name
		script := fmt.Sprintf("#!/bin/sh\nexec ssh -F %s %s \"$@\"\n", sshConfig, opts)
		return p, os.WriteFile(p, []byte(script), 0o755)
	}
	sshDefault, err := wrap("ssh-default", "")
	if err != nil {
		return err
	}
	sshCurve, err := wrap("ssh-curve25519", "-o KexAlgorithms=curve25519-sha256")
	if err != nil {
		return err
	}
	np := strconv.Itoa(n)
	cmds := [][]string{
		append([]string{mpiexec, "-f", hostfile, "-launcher", "ssh", "-launcher-exec", sshDefault, "-iface", iface, "-ppn", strconv.Itoa(ppn), "-n", np}, prog...),
		append([]string{mpiexec, "-f", hostfile, "-launcher", "ssh", "-launcher-exec", sshCurve, "-iface", iface, "-ppn", strconv.Itoa(ppn), "-n", np}, prog...),
	}
	names := []string{"mpiexec, OpenSSH default key exchange", "mpiexec, OpenSSH curve25519"}
	if len(trees) == 0 {
		trees = []string{""}
	}
	for _, tree := range trees {
		args := []string{ftl, "run", "--hostfile", hostfile, "--ssh-config", sshConfig, "--ppn", strconv.Itoa(ppn), "-n", np}
		name := "ftlaunch (default tree)"
		if tree != "" {
			args = append(args, "--tree", tree)
			name = "ftlaunch --tree " + tree
		}
		cmds = append(cmds, append(append(args, extra...), prog...))
		names = append(names, name)
	}
	times := make([][]time.Duration, len(cmds))
	for range runs {
		for i, c := range cmds {
			d, _, err := timed(c)
			if err != nil {
				return err
			}
			times[i] = append(times[i], d)
		}
	}
	host, _ := os.Hostname()
	fmt.Printf("ftbench: `%s` on %d hosts x %d ranks = %d ranks, %d runs each, interleaved; host %s, %s\n\n", strings.Join(prog, " "), hosts, ppn, n, runs, host, time.Now().UTC().Format(time.RFC3339))
	fmt.Println("| launcher | median | min | / mpiexec default | / mpiexec curve25519 |")
	fmt.Println("|---|---:|---:|---:|---:|")
	def, curve := median(times[0]).Seconds(), median(times[1]).Seconds()
	for i, ts := range times {
		m := median(ts).Seconds()
		fmt.Printf("| %s | %s | %s | %.2f | %.2f |\n", names[i], ms(median(ts)), ms(slices.Min(ts)), m/def, m/curve)
	}
	return nil
}

func parseSizes(s string) ([]int, error) {
	var ns []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad rank count %q", f)
		}
		ns = append(ns, n)
	}
	return ns, nil
}

var tableRE = regexp.MustCompile(`\[\s*([0-9.]+)s\] node table of \d+ ranks published`)

// timed runs a command to completion and returns its wall time and stderr.
func timed(argv []string) (time.Duration, []byte, error) { return timedEnv(argv, nil) }

// timedEnv is timed with variables added to the environment.
func timedEnv(argv, env []string) (time.Duration, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	cmd.Stdout = nil
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		return d, errb.Bytes(), fmt.Errorf("%s: %w\n%s", strings.Join(argv, " "), err, errb.Bytes())
	}
	return d, errb.Bytes(), nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", d.Seconds()*1e3) }

func run(ftl, demo, mpiexec, baseline string, agentProcess bool, runs int, ns []int, extra, replicas, prog []string) error {
	host, _ := os.Hostname()
	fmt.Printf("ftbench: %d runs each, interleaved; host %s, %s\n\n", runs, host, time.Now().UTC().Format(time.RFC3339))
	if demo == "" {
		return compare(ftl, baseline, mpiexec, agentProcess, runs, ns, extra, replicas, prog)
	}

	fmt.Println("Startup with the demo application (ftlaunch run start → every rank holds the node table), and the whole demo run:")
	fmt.Println()
	fmt.Println("| ranks | node table (median) | min | whole run (median) |")
	fmt.Println("|---:|---:|---:|---:|")
	for _, n := range ns {
		var table, whole []time.Duration
		for range runs {
			argv := append(append([]string{ftl, "run", "--verbose", "-n", strconv.Itoa(n)}, extra...), demo)
			d, stderr, err := timed(argv)
			if err != nil {
				return err
			}
			m := tableRE.FindSubmatch(stderr)
			if m == nil {
				return errors.New("no node-table time in ftlaunch --verbose output")
			}
			secs, _ := strconv.ParseFloat(string(m[1]), 64)
			table = append(table, time.Duration(secs*float64(time.Second)))
			whole = append(whole, d)
		}
		fmt.Printf("| %d | %s | %s | %s |\n", n, ms(median(table)), ms(slices.Min(table)), ms(median(whole)))
	}
	return compare(ftl, baseline, mpiexec, agentProcess, runs, ns, extra, replicas, prog)
}

// compare times whole runs of prog under ftlaunch and under mpiexec on
// this machine, interleaved: for each rank count, one run of every
// command in turn (the order rotating from round to round), so that they
// all see the same load. It prints one table with ftlaunch as told (extra),
// and, unless replicas is empty, one with the state log on three replicas
// (replicas, e.g. "--replicas 3 --test-nodes 4") beside the same ftlaunch
// without --replicas (the test nodes kept) and mpiexec. baseline, if set,
// is an older ftlaunch timed beside the new one in both.
func compare(ftl, baseline, mpiexec string, agentProcess bool, runs int, ns []int, extra, replicas, prog []string) error {
	if mpiexec == "" {
		return nil
	}
	if _, err := exec.LookPath(mpiexec); err != nil {
		return fmt.Errorf("mpiexec not found (install mpich, or -mpiexec ''): %w", err)
	}
	fmt.Println()
	fmt.Printf("Whole run of `%s`, ftlaunch %s against MPICH's mpiexec (Hydra), interleaved; load before: %s\n", strings.Join(prog, " "), argText(extra), loadAvg())
	fmt.Println()
	cmds := []timedCmd{{name: "ftlaunch", argv: append(append([]string{ftl, "run"}, extra...), prog...)}}
	if agentProcess {
		cmds = append(cmds, timedCmd{name: "ftlaunch, agent as a process", argv: cmds[0].argv, env: []string{"FTLAUNCH_AGENT_INPROCESS=0"}})
	}
	if baseline != "" {
		cmds = append(cmds, timedCmd{name: "baseline", argv: append(append([]string{baseline, "run"}, extra...), prog...)})
	}
	cmds = append(cmds, timedCmd{name: "mpiexec", argv: append([]string{mpiexec}, prog...)})
	if err := table(cmds, runs, ns); err != nil {
		return err
	}
	if len(replicas) == 0 {
		return nil
	}
	var without []string // the replicated run's flags but --replicas
	for i := 0; i < len(replicas); i++ {
		if replicas[i] == "--replicas" || replicas[i] == "-replicas" {
			i++
			continue
		}
		if !strings.HasPrefix(replicas[i], "--replicas=") {
			without = append(without, replicas[i])
		}
	}
	fmt.Println()
	fmt.Printf("The same with the state log on three replicas (4 ranks or more): ftlaunch %s, against ftlaunch %s and mpiexec, interleaved; load before: %s\n", argText(replicas), argText(without), loadAvg())
	fmt.Println()
	cmds = []timedCmd{
		{name: "ftlaunch " + argText(replicas), argv: append(append(append([]string{ftl, "run"}, extra...), replicas...), prog...)},
		{name: "ftlaunch " + argText(without), argv: append(append(append([]string{ftl, "run"}, extra...), without...), prog...)},
	}
	if baseline != "" {
		cmds = append(cmds, timedCmd{name: "baseline " + argText(replicas), argv: append(append(append([]string{baseline, "run"}, extra...), replicas...), prog...)})
	}
	cmds = append(cmds, timedCmd{name: "mpiexec", argv: append([]string{mpiexec}, prog...)})
	// Three replicas need three nodes with ranks.
	var big []int
	for _, n := range ns {
		if n >= 4 {
			big = append(big, n)
		}
	}
	if err := table(cmds, runs, big); err != nil {
		return err
	}
	fmt.Printf("\nLoad after: %s\n", loadAvg())
	return nil
}

// timedCmd is one command of a comparison; "-n N" goes after argv[0] (and
// its subcommand, for ftlaunch).
type timedCmd struct {
	name string
	argv []string
	env  []string // added to ftbench's environment
}

// withN returns the command's argv for n ranks.
func (c timedCmd) withN(n int) []string {
	at := 1
	if len(c.argv) > 1 && c.argv[1] == "run" {
		at = 2
	}
	out := append([]string(nil), c.argv[:at]...)
	out = append(out, "-n", strconv.Itoa(n))
	return append(out, c.argv[at:]...)
}

// table times cmds for every rank count, interleaved, and prints for each
// its median, p25 and p75 and its median's ratio to the last command's
// (mpiexec) and, with more than two commands, to the first's.
func table(cmds []timedCmd, runs int, ns []int) error {
	head := "| ranks | command | median | p25 | p75 | / " + cmds[len(cmds)-1].name + " |"
	rule := "|---:|---|---:|---:|---:|---:|"
	if len(cmds) > 2 {
		head += " / " + cmds[0].name + " |"
		rule += "---:|"
	}
	fmt.Println(head)
	fmt.Println(rule)
	for _, n := range ns {
		times := make([][]time.Duration, len(cmds))
		for round := range runs {
			for k := range cmds {
				i := (k + round) % len(cmds)
				d, _, err := timedEnv(cmds[i].withN(n), cmds[i].env)
				if err != nil {
					return err
				}
				times[i] = append(times[i], d)
			}
		}
		last, first := median(times[len(times)-1]), median(times[0])
		for i, c := range cmds {
			m := median(times[i])
			row := fmt.Sprintf("| %d | %s | %s | %s | %s | %.2f |", n, c.name, ms(m), ms(quantile(times[i], 0.25)), ms(quantile(times[i], 0.75)), m.Seconds()/last.Seconds())
			if len(cmds) > 2 {
				row += fmt.Sprintf(" %.2f |", m.Seconds()/first.Seconds())
			}
			fmt.Println(row)
		}
	}
	return nil
}

// quantile returns the q-quantile of ds (nearest rank).
func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s)-1) + 0.5)
	return s[min(max(i, 0), len(s)-1)]
}

// argText shows flags as typed ("(no flags)" for none).
func argText(args []string) string {
	if len(args) == 0 {
		return "(no flags)"
	}
	return strings.Join(args, " ")
}

// loadAvg returns the machine's load averages (1, 5, 15 minutes), as
// uptime prints them.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], ", ")
}
