package fence

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Rank times, for checks that two incarnations of a rank never ran at once
// (make chaos; docs/chaos.md, "incarnations"): when a rank's environment
// has EnvRankTimes, a directory, its agent appends a line to
// DIR/<node>.ranks as it starts the rank and once the rank's process
// ended, and a fence does for every rank it killed, once it ended. The
// times are wall-clock: the check compares them across nodes of one
// machine (the emulated cluster, test nodes).

// EnvRankTimes names the directory of the rank times (unset: none).
const EnvRankTimes = "FTLAUNCH_RANK_TIMES"

// RankTime is one line of the rank times: rank Rank's incarnation Inc
// started (Start) or ended on Node at Time.
type RankTime struct {
	Node  string
	Rank  int
	Inc   uint64
	Start bool
	Time  time.Time
}

// AppendRankTime appends t to its node's file in dir (one write: lines of
// concurrent writers do not mix).
func AppendRankTime(dir string, t RankTime) error {
	if dir == "" || !validName(t.Node) {
		return nil
	}
	ev := "end"
	if t.Start {
		ev = "start"
	}
	f, err := os.OpenFile(filepath.Join(dir, t.Node+".ranks"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("rank times: %w", err)
	}
	_, werr := fmt.Fprintf(f, "%s %d %d %d\n", ev, t.Rank, t.Inc, t.Time.UnixNano())
	return errors.Join(werr, f.Close())
}

// ReadRankTimes reads every node's rank times in dir; a line it cannot
// read is reported, and the others kept.
func ReadRankTimes(dir string) ([]RankTime, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.ranks"))
	if err != nil {
		return nil, err
	}
	var out []RankTime
	var errs []error
	for _, p := range files {
		node := strings.TrimSuffix(filepath.Base(p), ".ranks")
		f, err := os.Open(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var ev string
			var rt RankTime
			var ns int64
			if _, err := fmt.Sscanf(sc.Text(), "%s %d %d %d", &ev, &rt.Rank, &rt.Inc, &ns); err != nil || ev != "start" && ev != "end" {
				errs = append(errs, fmt.Errorf("%s: line %q unreadable", p, sc.Text()))
				continue
			}
			rt.Node, rt.Start, rt.Time = node, ev == "start", time.Unix(0, ns)
			out = append(out, rt)
		}
		errs = append(errs, sc.Err())
		f.Close()
	}
	return out, errors.Join(errs...)
}

// rankOf reads a rank's times directory, rank and incarnation from its
// environment (NUL-separated); ok is false if it has no times directory.
func rankOf(env []byte) (dir string, rank int, inc uint64, ok bool) {
	eachVar(env, func(k, v string) {
		switch k {
		case EnvRankTimes:
			dir = v
		case "FTLAUNCH_RANK":
			rank, _ = strconv.Atoi(v)
		case "FTLAUNCH_INCARNATION":
			inc, _ = strconv.ParseUint(v, 10, 64)
		}
	})
	return dir, rank, inc, dir != "" && inc > 0
}
