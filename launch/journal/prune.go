package journal

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/ftlaunch/ftlaunch/raftstore"
)

// DefaultKeep is how many job logs Prune keeps in the default state
// directory when nothing else is asked for.
const DefaultKeep = 100

// JobPrefix starts every job id the front-end makes, and so the name of
// every job directory: Prune removes nothing else.
const JobPrefix = "ft-"

// Prune removes the oldest job directories of stateDir (by the time they
// last changed), keeping the newest keep of them; keep <= 0 keeps all. A
// job whose log is locked (a replica of it runs) is never removed, nor
// counted against keep. It returns the directories it removed; an error
// for one directory does not stop it (the errors are joined).
func Prune(stateDir string, keep int) ([]string, error) {
	if keep <= 0 {
		return nil, nil
	}
	ents, err := os.ReadDir(stateDir)
	if err != nil {
		return nil, fmt.Errorf("prune %s: %w", stateDir, err)
	}
	type job struct {
		dir string
		mod time.Time
	}
	var jobs []job
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), JobPrefix) || checkJobID(e.Name()) != nil {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		jobs = append(jobs, job{dir: filepath.Join(stateDir, e.Name()), mod: info.ModTime()})
	}
	slices.SortFunc(jobs, func(a, b job) int {
		return cmp.Or(b.mod.Compare(a.mod), strings.Compare(b.dir, a.dir))
	})
	var removed []string
	var errs []error
	kept := 0
	for _, j := range jobs {
		if kept < keep {
			kept++
			continue
		}
		unlock, err := lockJob(j.dir)
		if err != nil {
			continue // in use (or unreadable): left alone
		}
		err = os.RemoveAll(j.dir)
		unlock()
		if err != nil {
			errs = append(errs, fmt.Errorf("prune: %w", err))
			continue
		}
		removed = append(removed, j.dir)
	}
	return removed, errors.Join(errs...)
}

// lockJob takes the lock of every replica database under a job's
// directory, as a replica that opens it would; it fails if any is held.
// The returned function releases them.
func lockJob(jobDir string) (unlock func(), err error) {
	var held []*os.File
	unlock = func() {
		for _, f := range held {
			f.Close() // closing releases the lock
		}
	}
	dbs, err := filepath.Glob(filepath.Join(jobDir, "*", raftstore.DBFile))
	if err != nil {
		return nil, err
	}
	for _, db := range dbs {
		f, err := os.Open(db)
		if err != nil {
			unlock()
			return nil, err
		}
		held = append(held, f)
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			unlock()
			return nil, fmt.Errorf("%s: %w", db, err)
		}
	}
	return unlock, nil
}
