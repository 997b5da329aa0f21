# Shared by the bench-*.sh scripts (sourced): timing of whole commands.
# They set $tmp (a scratch directory) before use.

# timed NAME CMD...: runs CMD with its output in $tmp/out and $tmp/err,
# appends its wall time in microseconds to $tmp/NAME.wall; a failure ends
# the script with CMD's stderr.
timed() {
	name=$1
	shift
	t0=$(date +%s%N)
	"$@" >"$tmp/out" 2>"$tmp/err" || { echo "$(basename "$0"): $name failed:" >&2; cat "$tmp/err" >&2; exit 1; }
	t1=$(date +%s%N)
	echo $(((t1 - t0) / 1000)) >>"$tmp/$name.wall"
}

# median FILE: the median of the numbers in FILE, one per line.
median() { sort -n "$1" | awk '{a[NR]=$1} END {printf "%.10g\n", (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
