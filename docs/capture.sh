#!/usr/bin/env bash
# capture.sh: refill every output shown in README.md and docs/*.md from the current code.
#
#   bash docs/capture.sh                  # from the repository root: every file (~10 minutes on
#                                         # 2 cores, most of it the README's full exit gate)
#   bash docs/capture.sh docs/arena.md    # only the files named
#
# A captured block is a marker line, a fenced block, and a closing marker:
#
#   <!-- capture: run reuse --quick | head -40 -->
#   ```
#   $ gptlab run reuse --quick | head -40
#   (the output)
#   ```
#   <!-- /capture -->
#
# Before the " | ", gptlab's arguments, split at spaces (no quoting); after it, optionally, a
# shell filter the output goes through. The script builds gptlab once into a temporary
# directory, runs each distinct command once (stdout only, COLUMNS=100; stderr is shown when the
# command fails) and rewrites the block's content. README.md's labs table, between the lines
# <!-- labs --> and <!-- /labs -->, is rewritten from `gptlab list`.
#
# Files are replaced atomically (a temporary file beside each, then a rename), and only after
# every command of every file has run: a marker without its closing line, or a command that
# exits with a status other than 0 or 1, leaves every file as it was. Running it twice changes
# nothing but timings. GPTLAB_SRC=DIR builds gptlab from another checkout (a `git worktree` of
# a commit, say) while the files refilled stay these.
#
# Exit status: 0 when every command held all its checks; 1 when some command exited 1 (a check
# failed: its block shows the failure, and the files are written); 2 for a malformed file, a
# tree that does not build, or a failed command.
set -euo pipefail
export LC_ALL=C.UTF-8 COLUMNS=100

if [[ ! -f go.mod ]] || ! grep -q '^module gptlab$' go.mod; then
	echo "capture.sh: run me from gptlab's root (bash docs/capture.sh)" >&2
	exit 2
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gptlab-capture.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

src=${GPTLAB_SRC:-.} # the tree gptlab is built from: this one unless GPTLAB_SRC names another
echo "capture: building gptlab from $src" >&2
if ! go build -C "$src" -o "$tmp/gptlab" .; then
	echo "capture.sh: gptlab does not build; no file changed" >&2
	exit 2
fi

declare -A outputs # command (gptlab's arguments) -> file holding its stdout
checks_failed=0
runs=0

# run ARGS: run gptlab once per distinct ARGS; sets $out to the file with its stdout.
run() {
	local args=$1 key status t0 argv
	key=${args// /_}
	if [[ -n ${outputs[$key]:-} ]]; then
		out=${outputs[$key]}
		return
	fi
	runs=$((runs + 1))
	out="$tmp/out.$runs"
	read -r -a argv <<<"$args"
	echo "capture: gptlab $args" >&2
	t0=$SECONDS
	status=0
	"$tmp/gptlab" "${argv[@]}" >"$out" 2>"$tmp/err.$runs" </dev/null || status=$?
	case $status in
	0) ;;
	1)
		checks_failed=$((checks_failed + 1))
		echo "capture: gptlab $args: exit status 1 (a check failed; the block shows it)" >&2
		;;
	*)
		echo "capture: gptlab $args: exit status $status; stderr:" >&2
		sed 's/^/    /' "$tmp/err.$runs" >&2
		exit 2
		;;
	esac
	echo "capture:   $((SECONDS - t0)) s" >&2
	outputs[$key]=$out
}

# block FILE LINENO SPEC: print the fenced block for the marker's SPEC ("ARGS" or
# "ARGS | FILTER").
block() {
	local file=$1 n=$2 spec=$3 args filter="" line
	args=$spec
	if [[ $spec == *" | "* ]]; then
		args=${spec%% | *}
		filter=${spec#* | }
	fi
	read -r args <<<"$args" # trim the spaces around it
	if [[ -z $args ]]; then
		echo "$file:$n: capture marker names no command" >&2
		exit 2
	fi
	run "$args"
	echo '```'
	echo "\$ gptlab $spec"
	if [[ -n $filter ]]; then
		bash -c "$filter" <"$out" >"$tmp/filtered" || {
			echo "$file:$n: filter failed: $filter" >&2
			exit 2
		}
	else
		cp "$out" "$tmp/filtered"
	fi
	while IFS= read -r line || [[ -n $line ]]; do
		if ((${#line} > 100)); then
			echo "$file:$n: warning: a line of $args's output is ${#line} characters wide" >&2
		fi
		printf '%s\n' "$line"
	done <"$tmp/filtered"
	echo '```'
}

# labs: the README's labs table, from gptlab list.
labs() {
	local name rest
	echo '| lab | what it does |'
	echo '|---|---|'
	while read -r name rest; do
		if [[ $rest == *"|"* ]]; then
			echo "capture.sh: lab $name's line has a '|': the table cannot hold it" >&2
			exit 2
		fi
		printf '| `%s` | %s |\n' "$name" "$rest"
	done < <("$tmp/gptlab" list)
}

# refill FILE: print FILE with every block refilled.
refill() {
	local file=$1 line n=0 start=0 inside=""
	while IFS= read -r line || [[ -n $line ]]; do
		n=$((n + 1))
		if [[ -n $inside ]]; then
			if [[ $line == "<!-- /$inside -->" ]]; then
				printf '%s\n' "$line"
				inside=""
			fi
			continue
		fi
		printf '%s\n' "$line"
		if [[ $line =~ ^'<!-- capture: '(.*)' -->'$ ]]; then
			block "$file" "$n" "${BASH_REMATCH[1]}"
			inside=capture start=$n
		elif [[ $line == '<!-- labs -->' ]]; then
			labs
			inside=labs start=$n
		fi
	done <"$file"
	if [[ -n $inside ]]; then
		echo "$file:$start: <!-- $inside --> has no closing <!-- /$inside --> line" >&2
		exit 2
	fi
}

files=("$@")
if ((${#files[@]} == 0)); then
	files=(README.md docs/*.md)
fi

i=0
for f in "${files[@]}"; do
	i=$((i + 1))
	refill "$f" >"$tmp/file.$i"
done

# Every file is ready: replace each atomically (a temporary beside it, then a rename).
i=0
for f in "${files[@]}"; do
	i=$((i + 1))
	if cmp -s "$tmp/file.$i" "$f"; then
		continue
	fi
	cp "$tmp/file.$i" "$f.capture.tmp"
	chmod --reference="$f" "$f.capture.tmp" 2>/dev/null || true
	mv -f "$f.capture.tmp" "$f"
	echo "capture: rewrote $f" >&2
done

if ((checks_failed > 0)); then
	echo "capture: $checks_failed command(s) exited 1: a check failed; see their blocks" >&2
	exit 1
fi
