package harness

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/client"
)

// AppDone starts rank 0's last line when the result was verified.
const AppDone = "chaos app: verified"

// App is the application chaos runs by default (`ftlaunch chaos app`):
// every rank publishes its rank, then for each of steps steps writes one
// line of its own ("step S rank R", never twice), works for interval and
// joins an allgather whose every value it checks; rank 0 then prints
// AppDone. It lasts about steps x interval, through the launcher's
// collectives all along, so that a fault anywhere stops it.
func App(steps int, interval time.Duration, stdout io.Writer) error {
	c, err := client.Init()
	if err != nil {
		return fmt.Errorf("init: %w", err)
	}
	defer c.Close()
	rank, size := c.Rank(), c.Size()
	table, err := c.Publish([]byte(strconv.Itoa(rank)))
	if err != nil {
		return fmt.Errorf("rank %d: publish: %w", rank, err)
	}
	for r, v := range table {
		if string(v) != strconv.Itoa(r) {
			return fmt.Errorf("rank %d: node table[%d] = %q", rank, r, v)
		}
	}
	timer := time.NewTimer(interval)
	defer timer.Stop()
	for s := 1; s <= steps; s++ {
		if _, err := fmt.Fprintf(stdout, "step %d rank %d\n", s, rank); err != nil {
			return fmt.Errorf("rank %d: write: %w", rank, err)
		}
		timer.Reset(interval)
		<-timer.C // the step's work
		all, err := c.Allgather([]byte(strconv.Itoa(s*size + rank)))
		if err != nil {
			return fmt.Errorf("rank %d: step %d: allgather: %w", rank, s, err)
		}
		if len(all) != size {
			return fmt.Errorf("rank %d: step %d: allgather of %d values, want %d", rank, s, len(all), size)
		}
		for r, v := range all {
			if string(v) != strconv.Itoa(s*size+r) {
				return fmt.Errorf("rank %d: step %d: value of rank %d is %q", rank, s, r, v)
			}
		}
	}
	if err := c.Barrier(); err != nil {
		return fmt.Errorf("rank %d: barrier: %w", rank, err)
	}
	if rank == 0 {
		if _, err := fmt.Fprintf(stdout, "%s: %d ranks, %d steps\n", AppDone, size, steps); err != nil {
			return errors.Join(errors.New("rank 0: write the result"), err)
		}
	}
	return nil
}

// AppMain is `ftlaunch chaos app ARGS...` (not in the help): it parses the
// application's flags (--steps, --interval), runs App as one rank and
// returns its exit status.
func AppMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ftlaunch chaos app", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	steps := fs.Int("steps", 20, "")
	interval := fs.Duration("interval", 100*time.Millisecond, "")
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "ftlaunch chaos app: %v\n", err)
		return 2
	}
	if err := App(*steps, *interval, stdout); err != nil {
		fmt.Fprintf(stderr, "ftlaunch chaos app: %v\n", err)
		return 1
	}
	return 0
}
