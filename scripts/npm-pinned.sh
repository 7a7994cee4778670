#!/bin/sh
# npm-pinned.sh TARGET WHAT PINS DIR CHECK [NPM-FLAGS...]
#
# Installs the npm packages pinned by PINS/package.json and its lock
# (without registry URLs) into the folder DIR, unless DIR/CHECK exists and
# DIR holds the same lock: the make targets that install npm packages for
# tests (mcp-deps, embed-deps, eval-deps) share it. TARGET and WHAT name
# the target and what it installs in the messages; NPM-FLAGS go to npm ci.
set -eu
if [ $# -lt 5 ]; then
	echo "usage: npm-pinned.sh TARGET WHAT PINS DIR CHECK [NPM-FLAGS...]" >&2
	exit 2
fi
target=$1 what=$2 pins=$3 dir=$4 check=$5
shift 5
if [ -e "$dir/$check" ] && cmp -s "$pins/package-lock.json" "$dir/package-lock.json"; then
	echo "$target: $what: installed"
	exit 0
fi
echo "$target: installing $what into $dir"
rm -rf "$dir"
mkdir -p "$dir"
cp "$pins/package.json" "$pins/package-lock.json" "$dir/"
cd "$dir"
exec npm ci "$@" --ignore-scripts --no-audit --no-fund --loglevel=error
