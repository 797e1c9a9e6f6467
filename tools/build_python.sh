#!/usr/bin/env bash
# Build CPython 3.13 into PREFIX from the upstream tarball of Debian's
# python3.13 source package (trixie), fetched with a private apt
# configuration from the Debian archive that the system's own apt sources
# already use: the system's sources stay untouched. `--free-threaded`
# configures it with `--disable-gil` (the interpreter is then python3.13t);
# without it, the regular build with the GIL (python3.13).
#
# Usage: tools/build_python.sh [--free-threaded] PREFIX
set -euo pipefail

configure_args=()
interpreter=python3.13
gil_enabled=True
if [ "${1:-}" = "--free-threaded" ]; then
	configure_args=(--disable-gil)
	interpreter=python3.13t
	gil_enabled=False
	shift
fi
prefix=$(realpath -m "$1")
if [ -x "$prefix/bin/$interpreter" ]; then
	exit 0
fi
work=$(realpath -m "$prefix.build")
rm -rf "$work"
mkdir -p "$work/apt/lists/partial" "$work/apt/cache/archives/partial" "$work/src"
# The Debian archive that serves this system's own release (not its
# -security or -updates suites), as the system's apt sources name it.
codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
archive=$(apt-get indextargets --no-release-info --format '$(RELEASE) $(REPO_URI)' |
	awk -v suite="$codename" '$1 == suite { print $2; exit }')
if [ -z "$archive" ]; then
	echo "build_python.sh: no Debian archive in the system's apt sources" >&2
	exit 1
fi
echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $archive trixie main" \
	>"$work/apt/sources.list"
apt_options=(
	-o "Dir::Etc::SourceList=$work/apt/sources.list"
	-o "Dir::Etc::SourceParts=/dev/null"
	-o "Dir::State::Lists=$work/apt/lists"
	-o "Dir::Cache=$work/apt/cache"
	-o "Debug::NoLocking=1"
)
apt-get "${apt_options[@]}" -qq update
(cd "$work/src" && apt-get "${apt_options[@]}" -qq source --download-only python3.13)
tar -xf "$work"/src/python3.13_*.orig.tar.xz -C "$work/src"
cd "$work"/src/Python-3.13*/
./configure -q "${configure_args[@]}" --prefix="$prefix" --with-ensurepip=install >/dev/null
make -s -j2 >/dev/null
make -s install >/dev/null
rm -rf "$work"
"$prefix/bin/$interpreter" -c "import sys; assert sys._is_gil_enabled() is $gil_enabled"
