package sshspawn_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/sshspawn"
)

// A parent agent starts a child agent and hands it the job's credentials
// on stdin; the session stays open for the job's life.
func Example() {
	sp, err := sshspawn.New(sshspawn.Options{
		ConfigFile:     "", // ~/.ssh/config when present
		HostKeyPolicy:  sshspawn.HostKeyAcceptNew,
		ConnectTimeout: 5 * time.Second,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	defer sp.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	credentials := []byte("...job CA and token...\n")
	s, err := sp.Start(ctx, "node017", []string{"ftlaunch", "agent", "--parent", "10.0.0.1:7000"}, credentials)
	if err != nil {
		fmt.Fprintln(os.Stderr, err) // names the host; errors.Is(err, sshspawn.ErrHostKeyChanged) etc.
		return
	}
	go io.Copy(os.Stderr, s.Stderr())
	go io.Copy(os.Stdout, s.Stdout())
	tm := s.Timings()
	fmt.Println("launched in", tm.Launch(), "after", tm.Attempts, "attempt(s)")

	// ... the job runs ...
	s.Close() // the child agent sees EOF on stdin and shuts down
}
