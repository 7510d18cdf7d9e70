#!/usr/bin/env bash
# The .deb (cmake/BatonPackaging.cmake), made by cpack from this build tree into WORK_DIR: holds
# the executable, the units in /lib/systemd/system, the man page, bash completion and the example
# config (also as the conffile /etc/baton/baton.json) and nothing of the library; every package
# it depends on is installed here (the stand-in for "installs on a clean Debian 12"); unpacked
# into a fresh root directory, ROOT/usr/bin/baton runs and validates ROOT/etc/baton/baton.json.
# usage: deb_test.sh BUILD_DIR WORK_DIR VERSION
set -euo pipefail
build=$1
work=$2
version=$3
fail() {
  echo "deb: $*" >&2
  exit 1
}
rm -rf "$work" && mkdir -p "$work"
cpack --config "$build/CPackConfig.cmake" -B "$work/out" >"$work/cpack.log" 2>&1 ||
  { cat "$work/cpack.log"; fail "cpack failed"; }
debs=("$work"/out/*.deb)
((${#debs[@]} == 1)) && [[ -f "${debs[0]}" ]] || fail "expected one .deb in $work/out: ${debs[*]}"
deb=${debs[0]}

dpkg-deb -c "$deb" >"$work/contents"
for path in ./usr/bin/baton ./lib/systemd/system/baton.service ./lib/systemd/system/baton@.service \
  ./usr/share/man/man1/baton.1.gz ./usr/share/bash-completion/completions/baton \
  ./usr/share/doc/baton/examples/baton.json ./etc/baton/baton.json; do
  grep -q " $path\$" "$work/contents" || fail "$path is not in the package"
done
! grep -E ' \./usr/include/|\.a$|/cmake/|/pkgconfig/|\.so' "$work/contents" ||
  fail "library files in the package"
! grep -E ' \./usr/lib/' "$work/contents" || fail "units left in /usr/lib"

[[ "$(dpkg-deb -f "$deb" Package)" == baton ]] || fail "package name $(dpkg-deb -f "$deb" Package)"
[[ "$(dpkg-deb -f "$deb" Version)" == "$version" ]] || fail "version $(dpkg-deb -f "$deb" Version)"
[[ "$(dpkg-deb -f "$deb" Section)" == admin ]] || fail "section $(dpkg-deb -f "$deb" Section)"
dpkg-deb -e "$deb" "$work/control"
grep -qx /etc/baton/baton.json "$work/control/conffiles" || fail "no conffile /etc/baton/baton.json"
grep -q 'adduser --system --group --home /var/lib/baton' "$work/control/postinst" ||
  fail "postinst does not create the baton user"

# Depends: every group of alternatives has an installed package (versions as dpkg compares them).
depends=$(dpkg-deb -f "$deb" Depends)
grep -q 'libc6' <<<"$depends" || fail "Depends lacks libc6 (dpkg-shlibdeps did not run?): $depends"
provided=$(dpkg-query -W -f='${db:Status-Abbrev} ${Provides}\n')
IFS=',' read -ra groups <<<"$depends"
for group in "${groups[@]}"; do
  ok=0
  IFS='|' read -ra alternatives <<<"$group"
  for alt in "${alternatives[@]}"; do
    read -r name relation wanted <<<"$(sed -E 's/[()]/ /g' <<<"$alt")"
    installed=$(dpkg-query -W -f='${Status} ${Version}' "$name" 2>/dev/null || true)
    if [[ "$installed" == "install ok installed "* ]]; then
      if [[ -z "${relation:-}" ]] ||
        dpkg --compare-versions "${installed##* }" "$relation" "$wanted"; then
        ok=1
      fi
    elif [[ -z "${relation:-}" ]] && grep -qE "^ii .*(^| |,)$name(,| |\$)" <<<"$provided"; then
      ok=1 # a virtual package (libspdlog1.10-fmt9 is provided by libspdlog1.10)
    fi
  done
  ((ok)) || fail "dependency '$group' is not installed here"
done
# apt agrees: installing the .deb here would install it alone, removing nothing (simulated:
# nothing on this machine changes).
apt-get install --simulate --no-install-recommends "$deb" >"$work/apt.log" 2>&1 ||
  { cat "$work/apt.log"; fail "apt-get install --simulate failed"; }
grep -q '^Inst baton ' "$work/apt.log" && grep -q ' 1 newly installed, 0 to remove' "$work/apt.log" ||
  { cat "$work/apt.log"; fail "apt-get would install or remove other packages"; }

# Installed into a fresh root directory (dpkg-deb -x: the files, no maintainer scripts).
root="$work/root"
dpkg-deb -x "$deb" "$root"
reported=$("$root/usr/bin/baton" --version)
[[ "$reported" == "baton $version" ]] || fail "baton --version says '$reported'"
"$root/usr/bin/baton" validate --config "$root/etc/baton/baton.json" >"$work/validate.log" 2>&1 ||
  { cat "$work/validate.log"; fail "baton validate of the packaged config"; }
grep -q '^ExecStart=/usr/bin/baton run --config /etc/baton/' "$root/lib/systemd/system/baton.service" ||
  fail "baton.service does not run /usr/bin/baton"
cmp -s "$root/etc/baton/baton.json" "$root/usr/share/doc/baton/examples/baton.json" ||
  fail "/etc/baton/baton.json differs from the example"

echo "$(basename "$deb"): $(stat -c %s "$deb") bytes; Depends: $depends"
cat "$work/contents"
