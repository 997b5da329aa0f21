package spawn

import (
	"fmt"
	"os"
	"os/exec"
)

// StartPiped starts cmd with its standard input, output and error on new
// pipes and returns this side's ends. The pipes belong to the caller, not
// to cmd: Wait does not close them, so output can be read to its end
// after the command exited.
func StartPiped(cmd *exec.Cmd) (stdin, stdout, stderr *os.File, err error) {
	var ours, theirs [3]*os.File
	closeAll := func() {
		for i := range 3 {
			if ours[i] != nil {
				ours[i].Close()
			}
			if theirs[i] != nil {
				theirs[i].Close()
			}
		}
	}
	for i, name := range []string{"stdin", "stdout", "stderr"} {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll()
			return nil, nil, nil, fmt.Errorf("%s pipe: %w", name, err)
		}
		if i == 0 {
			ours[i], theirs[i] = w, r
		} else {
			ours[i], theirs[i] = r, w
		}
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = theirs[0], theirs[1], theirs[2]
	err = cmd.Start()
	// The child holds its own copies now.
	for i := range 3 {
		theirs[i].Close()
		theirs[i] = nil
	}
	if err != nil {
		closeAll()
		return nil, nil, nil, err
	}
	return ours[0], ours[1], ours[2], nil
}
