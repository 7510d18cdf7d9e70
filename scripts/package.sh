#!/usr/bin/env bash
# scripts/package.sh: builds the baton .deb with CPack (cmake/BatonPackaging.cmake) and prints
# its path. The build is Release with prefix /usr, without tests and examples; an existing build
# directory is reused (only what changed is rebuilt).
#
# usage: scripts/package.sh [--build-dir DIR] [--out DIR] [--jobs N]
#
#   --build-dir DIR  build directory (default: build-release), relative to the repository root
#   --out DIR        where the .deb goes (default: DIR/packages)
#   --jobs N         parallel build jobs (default: nproc)
#
# The package: /usr/bin/baton, /lib/systemd/system/baton.service and baton@.service, the man
# page, bash completion, /usr/share/doc/baton/examples/baton.json and the same file as the
# conffile /etc/baton/baton.json; postinst creates the system user baton (home /var/lib/baton).
# Install it with `apt install ./baton_*.deb`; the service is not enabled until you do.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
die() {
  echo "package.sh: $*" >&2
  exit 2
}
build_dir=build-release
out=""
jobs=$(nproc 2>/dev/null || echo 2)
while (($#)); do
  case "$1" in
    --build-dir) (($# >= 2)) || die "--build-dir needs a value"; build_dir=$2; shift 2 ;;
    --out) (($# >= 2)) || die "--out needs a value"; out=$2; shift 2 ;;
    --jobs | -j) (($# >= 2)) || die "--jobs needs a value"; jobs=$2; shift 2 ;;
    -h | --help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || die "--jobs: expected a positive number, got '$jobs'"
out=${out:-$build_dir/packages}

# shellcheck source=deps.sh
source "$ROOT/scripts/deps.sh"
baton_ensure_packages "${BATON_BUILD_PACKAGES[@]}" dpkg-dev file || exit 1

echo "package.sh: configuring $build_dir (Release, prefix /usr)" >&2
cmake -S "$ROOT" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
  -DBUILD_SHARED_LIBS=OFF -DBATON_BUILD_DAEMON=ON -DBATON_BUILD_TESTS=OFF \
  -DBATON_BUILD_EXAMPLES=OFF -DBATON_SANITIZE= >/dev/null
echo "package.sh: building with $jobs jobs" >&2
cmake --build "$build_dir" -j "$jobs" >&2
mkdir -p "$out"
out=$(cd "$out" && pwd)
cpack --config "$build_dir/CPackConfig.cmake" -B "$out" >&2
rm -rf "$out/_CPack_Packages" # cpack's staging tree
deb=$(ls -t "$out"/baton_*.deb | head -n1)
[[ -f "$deb" ]] || die "cpack made no .deb in $out"
echo "$deb"
