//go:build !race

package runner

// raceEnabled is true under the race detector, which slows the broker and
// the runner about tenfold: the long fault tests replay less.
const raceEnabled = false
