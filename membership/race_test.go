//go:build race

package membership

// raceEnabled: the binary runs under the race detector (see skipUnderRace).
const raceEnabled = true
