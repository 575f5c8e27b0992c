#!/usr/bin/env bash
# check-fork.sh (make check-fork): compares this copy of gnet with the release it was taken from (the
# version leasecached's go.mod requires, from the module cache) and fails on any difference that the table
# in LEASECACHED.md ("The listing") does not list:
#   - a file only here must be listed as added; an added .go file names the patch in its first line;
#   - a file that differs must be listed as modified, with its hunk count and its added and removed lines
#     as `diff -U0` counts them, and each of its hunks must carry a `leasecached patch` comment;
#   - a file only in the release must be a test (*_test.go, testdata/), a hidden file or directory (CI,
#     repository settings) or documentation (*.md): the copy leaves those out;
#   - every file the table lists must differ as listed.
set -euo pipefail

GO=${GO:-go}
fork=$(cd "$(dirname "$0")" && pwd)
listing=$fork/LEASECACHED.md
mod=github.com/panjf2000/gnet/v2

cd "$fork/../.." # the main module, whose go.mod pins the release (and replaces it with this directory)
ver=$($GO list -m -f '{{.Version}}' "$mod")
rel=$($GO mod download -json "$mod@$ver" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
if [ -z "$rel" ] || [ ! -d "$rel" ]; then
	echo "check-fork: could not find $mod@$ver in the module cache (go mod download -json $mod@$ver)" >&2
	exit 2
fi

fail=0
problem() {
	echo "check-fork: $*" >&2
	fail=1
}

# The table: | `path` | added or modified | hunks | + | - | hook points |, between the two markers.
declare -A kind hunks plus minus
listed=0
while IFS='|' read -r _ path change h p m _; do
	path=$(echo "$path" | tr -d '` ')
	change=$(echo "$change" | tr -d ' ')
	[ -n "$path" ] || continue
	if [ -n "${kind[$path]:-}" ]; then
		problem "$path is listed twice in LEASECACHED.md"
	fi
	kind[$path]=$change
	listed=$((listed + 1))
	hunks[$path]=$(echo "$h" | tr -d ' ')
	plus[$path]=$(echo "$p" | tr -d ' ')
	minus[$path]=$(echo "$m" | tr -d ' ')
	case $change in
	added | modified) ;;
	*) problem "$path: change '$change' in LEASECACHED.md is neither added nor modified" ;;
	esac
done < <(sed -n '/<!-- check-fork: begin -->/,/<!-- check-fork: end -->/p' "$listing" | grep '^| `')
if [ $listed -eq 0 ]; then
	problem "no listing found in $listing"
fi

files() { (cd "$1" && find . -type f | sed 's|^\./||' | LC_ALL=C sort); }

declare -A seen
nadd=0 nmod=0 nhunks=0 nleft=0
while IFS=$'\t' read -r where path; do
	seen[$path]=1
	case $where in
	release) # only in the release
		case /$path in
		*_test.go | */testdata/* | */.* | *.md) nleft=$((nleft + 1)) ;;
		*) problem "$path is in the release but not here (only tests, hidden files and *.md may be left out)" ;;
		esac
		;;
	fork) # only here
		nadd=$((nadd + 1))
		if [ "${kind[$path]:-}" != added ]; then
			problem "$path is not in the release and LEASECACHED.md does not list it as added"
		elif [[ $path == *.go ]] && ! head -n 1 "$fork/$path" | grep -q 'leasecached patch'; then
			problem "$path: an added .go file starts with a '// leasecached patch' comment"
		fi
		;;
	both)
		cmp -s "$rel/$path" "$fork/$path" && { seen[$path]=; continue; }
		nmod=$((nmod + 1))
		if [ "${kind[$path]:-}" != modified ]; then
			problem "$path differs from the release and LEASECACHED.md does not list it as modified"
			continue
		fi
		# hunks, added lines, removed lines, hunks without a leasecached patch comment
		read -r h p m bare < <(diff -U0 "$rel/$path" "$fork/$path" | tail -n +3 | awk '
			/^@@/ { if (n && !marked) bare++; n++; marked = 0; next }
			/^\+/ { p++; if (index($0, "leasecached patch")) marked = 1; next }
			/^-/  { m++ }
			END   { if (n && !marked) bare++; print n + 0, p + 0, m + 0, bare + 0 }')
		nhunks=$((nhunks + h))
		if [ "$h/$p/$m" != "${hunks[$path]}/${plus[$path]}/${minus[$path]}" ]; then
			problem "$path: $h hunks, +$p -$m lines; LEASECACHED.md lists ${hunks[$path]} hunks, +${plus[$path]} -${minus[$path]}"
		fi
		if [ "$bare" -gt 0 ]; then
			problem "$path: $bare hunks without a 'leasecached patch' comment (diff -U0 $rel/$path $fork/$path)"
		fi
		;;
	esac
done < <(LC_ALL=C comm <(files "$rel") <(files "$fork") |
	awk -F'\t' '$1 != "" { print "release\t" $1 } $2 != "" { print "fork\t" $2 } $3 != "" { print "both\t" $3 }')

for path in ${listed:+"${!kind[@]}"}; do
	if [ -z "${seen[$path]:-}" ]; then
		problem "$path is listed in LEASECACHED.md as ${kind[$path]}, but it is not"
	fi
done

if [ $fail -ne 0 ]; then
	echo "check-fork: third_party/gnet differs from $mod@$ver in ways LEASECACHED.md does not list (release: $rel)" >&2
	exit 1
fi
echo "check-fork: third_party/gnet is $mod@$ver with $nadd added files and $nmod modified ($nhunks hunks), as listed; $nleft release files (tests, CI, docs) left out"
