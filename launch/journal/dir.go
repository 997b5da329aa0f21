package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// LatestLink is the name of the symbolic link in a state directory that
// points at the directory of the latest job started there.
const LatestLink = "latest"

// DefaultStateDir returns where jobs keep their state when no directory is
// given: $XDG_STATE_HOME/ftlaunch/jobs, or ~/.local/state/ftlaunch/jobs
// when XDG_STATE_HOME is unset or not absolute.
func DefaultStateDir() (string, error) {
	if x := os.Getenv("XDG_STATE_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "ftlaunch", "jobs"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("state directory: %w (set XDG_STATE_HOME or give a state directory)", err)
	}
	return filepath.Join(home, ".local", "state", "ftlaunch", "jobs"), nil
}

// JobDir returns the directory of a job's state: stateDir/jobID.
func JobDir(stateDir, jobID string) string { return filepath.Join(stateDir, jobID) }

// checkJobID refuses ids that are not plain file names.
func checkJobID(id string) error {
	if id == "" || id == "." || id == ".." || id == LatestLink || strings.ContainsAny(id, `/\`) {
		return fmt.Errorf("job id %q: need a plain name other than %q", id, LatestLink)
	}
	return nil
}

// setLatest points stateDir/latest at the job's directory (a relative
// symbolic link, replaced atomically).
func setLatest(stateDir, jobID string) error {
	tmp := filepath.Join(stateDir, "."+LatestLink+"."+jobID)
	_ = os.Remove(tmp)
	if err := os.Symlink(jobID, tmp); err != nil {
		return fmt.Errorf("point %s at %s: %w", LatestLink, jobID, err)
	}
	if err := os.Rename(tmp, filepath.Join(stateDir, LatestLink)); err != nil {
		return errors.Join(fmt.Errorf("point %s at %s: %w", LatestLink, jobID, err), os.Remove(tmp))
	}
	return nil
}

// Latest returns the directory of the latest job started under stateDir.
func Latest(stateDir string) (string, error) {
	link := filepath.Join(stateDir, LatestLink)
	target, err := os.Readlink(link)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("no job has been started with state directory %s", stateDir)
		}
		return "", fmt.Errorf("latest job: %w", err)
	}
	if !filepath.IsAbs(target) {
		target = filepath.Join(stateDir, target)
	}
	return target, nil
}
