package jobctl

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/ftlaunch/ftlaunch/launch/output"
)

// Follower prints what a successor root appends to a job's output files
// (launch/root's successor.go): the ranks' lines (output/rank.R.out on
// Stdout, .err on Stderr, each labeled "[R] ") and the root's own
// (output/ftlaunch.log, on Stderr as the front-end prints them; the
// successor logs verbosely: its timestamped "ftlaunch: [ 1.234s]" lines
// only with Verbose).
type Follower struct {
	Dir            string // the job's directory
	Stdout, Stderr io.Writer
	Verbose        bool
	files          map[string]*followed
}

type followed struct {
	rank    int // -1: the root's log
	err     bool
	off     int64
	partial []byte
}

// Poll prints the complete lines appended since the last Poll.
func (f *Follower) Poll() {
	if f.files == nil {
		f.files = map[string]*followed{}
	}
	dir := filepath.Join(f.Dir, output.JobOutput)
	names, _ := filepath.Glob(filepath.Join(dir, "rank.*.*"))
	sort.Strings(names)
	names = append(names, filepath.Join(dir, output.JobLog))
	for _, name := range names {
		fl := f.files[name]
		if fl == nil {
			if fl = parseName(filepath.Base(name)); fl == nil {
				continue
			}
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

// parseName says what an output file holds (nil: not one to follow).
func parseName(base string) *followed {
	if base == output.JobLog {
		return &followed{rank: -1, err: true}
	}
	parts := strings.Split(base, ".")
	if len(parts) != 3 || (parts[2] != "out" && parts[2] != "err") {
		return nil
	}
	r, err := strconv.Atoi(parts[1])
	if err != nil {
		return nil
	}
	return &followed{rank: r, err: parts[2] == "err"}
}

// Flush prints the lines left without a newline.
func (f *Follower) Flush() {
	for _, fl := range f.files {
		if len(fl.partial) > 0 {
			f.write(fl, append(fl.partial, '\n'))
			fl.partial = nil
		}
	}
}

func (f *Follower) write(fl *followed, data []byte) {
	w := f.Stdout
	if fl.err {
		w = f.Stderr
	}
	var label []byte
	if fl.rank >= 0 {
		label = []byte("[" + strconv.Itoa(fl.rank) + "] ")
	}
	var out []byte
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		line := data[:i+1]
		data = data[i+1:]
		if fl.rank < 0 && !f.Verbose && bytes.HasPrefix(line, []byte("ftlaunch: [")) {
			continue // the successor's verbose log
		}
		out = append(append(out, label...), line...)
	}
	_, _ = w.Write(out)
}
