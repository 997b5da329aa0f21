package proto

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/ftlaunch/ftlaunch/overlay/wire"
)

// LookupEnv returns the value of the last setting of key in env (a list of
// KEY=VALUE strings, as exec.Cmd.Env), or "".
func LookupEnv(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

// ProgramError says why the program to launch cannot be run. Code is the
// exit status ftlaunch reports: 127 for a program that does not exist, 126
// for one that exists but cannot be executed (as a shell does).
type ProgramError struct {
	Program string
	Code    int
	Reason  string
}

func (e *ProgramError) Error() string {
	return fmt.Sprintf("program %q: %s", e.Program, e.Reason)
}

// ResolveProgram finds prog the way the ranks' exec will: a name with a
// slash is taken relative to wdir, any other name is searched in path (the
// ranks' PATH). It returns the path to execute.
func ResolveProgram(prog, wdir, path string) (string, error) {
	if prog == "" {
		return "", &ProgramError{Program: prog, Code: 127, Reason: "empty program name"}
	}
	if strings.Contains(prog, "/") {
		p := prog
		if !filepath.IsAbs(p) {
			p = filepath.Join(wdir, p)
		}
		if err := checkExecutable(p); err != nil {
			return "", &ProgramError{Program: prog, Code: codeFor(err), Reason: err.Error()}
		}
		return prog, nil
	}
	var lastErr error
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(wdir, dir)
		}
		p := filepath.Join(dir, prog)
		err := checkExecutable(p)
		if err == nil {
			return p, nil
		}
		if !errors.Is(err, fs.ErrNotExist) && lastErr == nil {
			lastErr = err
		}
	}
	if lastErr != nil {
		return "", &ProgramError{Program: prog, Code: 126, Reason: lastErr.Error()}
	}
	return "", &ProgramError{Program: prog, Code: 127, Reason: "not found in PATH"}
}

var errNotExecutable = errors.New("permission denied: not executable")

func checkExecutable(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("no such file: %w", fs.ErrNotExist)
		}
		return err
	}
	if st.IsDir() {
		return errors.New("is a directory")
	}
	if st.Mode().Perm()&0o111 == 0 {
		return errNotExecutable
	}
	return nil
}

func codeFor(err error) int {
	if errors.Is(err, fs.ErrNotExist) {
		return 127
	}
	return 126
}

// App is one program of an MPMD job (ftlaunch run -n 2 ./a : -n 4 ./b):
// N consecutive ranks, after those of the apps before it, run Argv in Wdir
// with Env. Its index is the ranks' appnum (MPICH's MPI_APPNUM).
type App struct {
	N    int
	Argv []string
	Env  []string
	Wdir string
}

func encodeApps(e *wire.Encoder, apps []App) {
	e.Uint(uint64(len(apps)))
	for _, a := range apps {
		e.Uint(uint64(a.N)).Strings(a.Argv).Strings(a.Env).String(a.Wdir)
	}
}

func decodeApps(d *wire.Decoder) []App {
	n := d.Count(4)
	var apps []App
	for range n {
		apps = append(apps, App{N: int(d.Uint()), Argv: d.Strings(), Env: d.Strings(), Wdir: d.String()})
	}
	return apps
}

// CheckApps verifies that apps, if any, cover a job of size ranks, each
// with a program.
func CheckApps(apps []App, size int) error {
	if len(apps) == 0 {
		return nil
	}
	total := 0
	for i, a := range apps {
		if a.N < 1 || len(a.Argv) == 0 {
			return fmt.Errorf("app %d: no ranks or no program", i)
		}
		total += a.N
	}
	if total != size {
		return fmt.Errorf("apps of %d ranks in a job of %d", total, size)
	}
	return nil
}

// App returns the program rank runs and its appnum: the spec's own for a
// job of one program.
func (s *NodeSpec) App(rank int) (App, int) {
	first := 0
	for i, a := range s.Apps {
		if rank < first+a.N {
			return a, i
		}
		first += a.N
	}
	return App{N: s.Size, Argv: s.Argv, Env: s.Env, Wdir: s.Wdir}, 0
}

// AppNum returns rank's appnum (PMI's get_appnum).
func (s *NodeSpec) AppNum(rank int) int {
	_, n := s.App(rank)
	return n
}
