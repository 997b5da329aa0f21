// Command ftbench compares launchers side by side on the same inputs:
// ftlaunch against MPICH's mpiexec, runs interleaved so that both see the
// same machine load, with medians and ratios. It also times ftlaunch's
// startup — from `ftlaunch run` until every rank holds the node table —
// with the demo application.
//
//	ftbench -ftlaunch bin/ftlaunch -ftdemo bin/ftdemo [-runs 7] [-sizes 1,64,256]
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
	mpiexec := flag.String("mpiexec", "mpiexec", "MPICH's mpiexec (empty: skip the comparison)")
	runs := flag.Int("runs", 7, "runs of each command")
	sizes := flag.String("sizes", "1,64,256", "rank counts")
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
		err = run(*ftl, *demo, *mpiexec, *runs, ns, strings.Fields(*extra), prog)
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
func timed(argv []string) (time.Duration, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
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

func run(ftl, demo, mpiexec string, runs int, ns []int, extra, prog []string) error {
	host, _ := os.Hostname()
	fmt.Printf("ftbench: %d runs each, interleaved; host %s, %s\n\n", runs, host, time.Now().UTC().Format(time.RFC3339))
	if demo == "" {
		return compare(ftl, mpiexec, runs, ns, extra, prog)
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
	return compare(ftl, mpiexec, runs, ns, extra, prog)
}

// compare times whole runs of prog under ftlaunch and under mpiexec on
// this machine, interleaved.
func compare(ftl, mpiexec string, runs int, ns []int, extra, prog []string) error {
	if mpiexec == "" {
		return nil
	}
	if _, err := exec.LookPath(mpiexec); err != nil {
		return fmt.Errorf("mpiexec not found (install mpich, or -mpiexec ''): %w", err)
	}
	fmt.Println()
	fmt.Printf("Whole run of `%s`, ftlaunch against MPICH's mpiexec (Hydra), interleaved:\n", strings.Join(prog, " "))
	fmt.Println()
	fmt.Println("| ranks | ftlaunch (median) | mpiexec (median) | ratio ftlaunch/mpiexec |")
	fmt.Println("|---:|---:|---:|---:|")
	for _, n := range ns {
		var a, b []time.Duration
		for range runs {
			d, _, err := timed(append(append([]string{ftl, "run", "-n", strconv.Itoa(n)}, extra...), prog...))
			if err != nil {
				return err
			}
			a = append(a, d)
			d, _, err = timed(append([]string{mpiexec, "-n", strconv.Itoa(n)}, prog...))
			if err != nil {
				return err
			}
			b = append(b, d)
		}
		ma, mb := median(a), median(b)
		fmt.Printf("| %d | %s | %s | %.2f |\n", n, ms(ma), ms(mb), ma.Seconds()/mb.Seconds())
	}
	return nil
}
