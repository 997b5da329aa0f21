package launch

import (
	"testing"
)

func TestHarnessFailover(t *testing.T) {
	hosts := []string{"nodeA", "nodeB", "nodeC"}
	opts := recoverOpts("none")
	opts.Replicas, opts.Verbose = 3, true
	testTiming(&opts)
	j := runOnNodes(t, hosts, 1, opts, nil)
	t.Logf("events %v\nstderr %s\nagents %s", j.obs.events(), j.stderr.String(), j.sp.log.String())
	checkCompleted(t, j, 3)
}
