package launch

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

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
