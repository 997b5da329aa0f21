package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/jobstate"
)

const attachUsage = `Usage: ftlaunch attach [--state-dir DIR] [JOB]

Follows a job whose front-end was lost (a job run with --replicas 3 or 5):
prints the output its new root writes to the job's state directory
(output/rank.R.out on stdout, output/rank.R.err on stderr, each line
labeled "[R] ") as it comes, until the job ends, then exits with the job's
exit code, after the lines that said why if it failed. JOB is a job id or directory (default: the latest job).

  --state-dir DIR   the state directory (default $XDG_STATE_HOME/ftlaunch/jobs)
`

// attachPoll is how often attach looks for new output and the job's end.
const attachPoll = 200 * time.Millisecond

func attachCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ftlaunch attach", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	stateDir := fs.String("state-dir", "", "")
	pos, err := parseArgs(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, attachUsage)
		return 0
	}
	if err == nil && len(pos) > 1 {
		err = fmt.Errorf("unexpected argument %q", pos[1])
	}
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch attach: %v (see ftlaunch attach --help)\n", err)
		return 2
	}
	target := ""
	if len(pos) == 1 {
		target = pos[0]
	}
	jobDir, _, err := jobstate.Resolve(*stateDir, target)
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch attach: %v\n", err)
		return 1
	}
	f := &follower{dir: filepath.Join(jobDir, "output"), stdout: stdout, stderr: stderr, files: map[string]*followed{}}
	for {
		// Read the status first: output written before the job's end is
		// then read below, before attach returns.
		st, err := jobstate.ReadStatus(*stateDir, jobDir)
		if err != nil {
			fmt.Fprintf(stderr, "ftlaunch attach: %v\n", err)
			return 1
		}
		f.poll()
		switch st.State {
		case "finished":
			f.flush()
			if *st.ExitCode != 0 {
				writeFailure(stderr, st)
			}
			return *st.ExitCode
		case "unfinished":
			f.flush()
			fmt.Fprintf(stderr, "ftlaunch attach: job %s ended without a final status (its roots were lost)\n", st.Job)
			return 1
		}
		time.Sleep(attachPoll) // polling files another process writes
	}
}

// writeFailure prints why a failed job failed, as its root said it.
func writeFailure(w io.Writer, st *jobstate.Status) {
	for _, f := range st.Failures {
		fmt.Fprintf(w, "ftlaunch: %s\n", f)
	}
	if len(st.Failures) == 0 {
		fmt.Fprintf(w, "ftlaunch: job %s ended with exit code %d: %s\n", st.Job, *st.ExitCode, st.Message)
	}
}

// follower prints what is appended to a job's output files.
type follower struct {
	dir            string
	stdout, stderr io.Writer
	files          map[string]*followed
}

type followed struct {
	rank    int
	err     bool
	off     int64
	partial []byte
}

// poll prints the complete lines appended since the last poll.
func (f *follower) poll() {
	names, _ := filepath.Glob(filepath.Join(f.dir, "rank.*.*"))
	sort.Strings(names)
	for _, name := range names {
		fl := f.files[name]
		if fl == nil {
			parts := strings.Split(filepath.Base(name), ".")
			if len(parts) != 3 || (parts[2] != "out" && parts[2] != "err") {
				continue
			}
			r, err := strconv.Atoi(parts[1])
			if err != nil {
				continue
			}
			fl = &followed{rank: r, err: parts[2] == "err"}
			f.files[name] = fl
		}
		file, err := os.Open(name)
		if err != nil {
			continue
		}
		b, err := io.ReadAll(io.NewSectionReader(file, fl.off, 1<<40))
		file.Close()
		if err != nil || len(b) == 0 {
			continue
		}
		fl.off += int64(len(b))
		data := append(fl.partial, b...)
		i := bytes.LastIndexByte(data, '\n')
		fl.partial = append([]byte(nil), data[i+1:]...)
		f.write(fl, data[:i+1])
	}
}

// flush prints the lines left without a newline.
func (f *follower) flush() {
	for _, fl := range f.files {
		if len(fl.partial) > 0 {
			f.write(fl, append(fl.partial, '\n'))
			fl.partial = nil
		}
	}
}

func (f *follower) write(fl *followed, data []byte) {
	w := f.stdout
	if fl.err {
		w = f.stderr
	}
	label := []byte("[" + strconv.Itoa(fl.rank) + "] ")
	var out []byte
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		out = append(append(out, label...), data[:i+1]...)
		data = data[i+1:]
	}
	_, _ = w.Write(out)
}
