#!/usr/bin/env bash
# The .deb end to end: builds it with CPack, installs it with apt, then runs what a user would from
# /usr/bin: `flashdesk-cli --version`, a `generate` on the installed demo model (no --model), plain
# and with its DSpark head (`--speculative dspark`: the same answer, drafts accepted), the
# app on the offscreen platform until the demo model has loaded (`--smoke-test`), and lintian (no
# errors). Needs root (apt installs system-wide; CI runs as root). Removes the package again at the
# end unless it was installed before. Usage: tests/packaging/package_test.sh [build dir]
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/../.."
build="${1:-build/release}"

fail() { echo "package test: FAILED: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "needs root to install the package with apt (CI runs as root): sudo $0 $build"
grep -q '^CMAKE_INSTALL_PREFIX:PATH=/usr$' "$build/CMakeCache.txt" ||
  fail "$build was configured with another install prefix: cmake -DCMAKE_INSTALL_PREFIX=/usr $build"

started=$SECONDS
rm -f "$build"/flashdesk_*.deb
cpack_log="$(cd "$build" && cpack -G DEB 2>&1)" || fail "cpack -G DEB: $cpack_log"
deb="$(ls "$build"/flashdesk_*.deb)"
echo "package test: built $deb ($(du -h "$deb" | cut -f1))"
dpkg-deb --field "$deb" Depends | sed 's/^/package test: Depends: /'

installed_before=no
dpkg-query -W -f='${Status}' flashdesk 2>/dev/null | grep -q "install ok installed" && installed_before=yes
home="$(mktemp -d /tmp/flashdesk-package-home.XXXXXX)"
clean_up() {
  rm -rf "$home"
  [ "$installed_before" = yes ] || DEBIAN_FRONTEND=noninteractive apt-get remove -y -q flashdesk >/dev/null 2>&1 || true
}
trap clean_up EXIT
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --reinstall "$(readlink -f "$deb")" >/dev/null ||
  fail "apt-get install $deb"
[ "$(command -v flashdesk-cli)" = /usr/bin/flashdesk-cli ] || fail "flashdesk-cli is not /usr/bin/flashdesk-cli"

/usr/bin/flashdesk-cli --version | grep -q '^flashdesk [0-9]' || fail "flashdesk-cli --version"

# A fresh home: the installed binaries must not lean on this machine's settings or caches.
export HOME="$home" XDG_CONFIG_HOME="$home/.config" XDG_DATA_HOME="$home/.local/share"
export XDG_CACHE_HOME="$home/.cache" XDG_RUNTIME_DIR="$home/runtime"
mkdir -m 700 "$XDG_RUNTIME_DIR"
# From / so that nothing relative to the source tree can be found.
answer="$(cd / && /usr/bin/flashdesk-cli generate --prompt "Hi! My name is Quinn." \
  --thinking off --max-tokens 12 --json)" || fail "flashdesk-cli generate without --model"
grep -q "\"answer\"" <<<"$answer" || fail "generate printed no answer: $answer"
echo "package test: generate: $answer"
# The demo model's DSpark head is installed with it: the same greedy answer, with drafts accepted.
spec="$(cd / && /usr/bin/flashdesk-cli generate --prompt "Hi! My name is Quinn." \
  --thinking off --max-tokens 12 --json --speculative dspark)" ||
  fail "flashdesk-cli generate --speculative dspark without --model"
answer_ids() { grep -o '"answer_ids":\[[^]]*\]' <<<"$1"; }
[ "$(answer_ids "$spec")" = "$(answer_ids "$answer")" ] ||
  fail "the speculative answer differs from the plain one: $spec"
grep -q '"accepted_tokens":[1-9]' <<<"$spec" || fail "the installed DSpark head accepted no drafts: $spec"
echo "package test: generate --speculative dspark:" \
  $(grep -o '"\(verifies\|drafted_tokens\|accepted_tokens\)":[0-9]*' <<<"$spec")

loaded="$(cd / && QT_QPA_PLATFORM=offscreen timeout 150 /usr/bin/flashdesk --smoke-test)" ||
  fail "the installed app did not load the demo model offscreen"
grep -q "/usr/share/flashdesk/models/flash-tiny" <<<"$loaded" || fail "the app loaded another model: $loaded"
echo "package test: app: $loaded"

# The copyright file: DEP-5, the maintainer of the control file as its contact (configured by
# packaging/CMakeLists.txt, no placeholder left), the compiled-in libraries' licences.
copyright=/usr/share/doc/flashdesk/copyright
maintainer="$(dpkg-deb --field "$deb" Maintainer)"
grep -qx "Upstream-Contact: $maintainer" "$copyright" || fail "$copyright does not name $maintainer"
grep -q '@[A-Z_]*@' "$copyright" && fail "$copyright has an unconfigured placeholder"
for licence in "public-domain" "Expat"; do
  grep -qx "License: $licence" "$copyright" || fail "$copyright has no $licence licence text"
done

command -v desktop-file-validate >/dev/null &&
  { desktop-file-validate /usr/share/applications/flashdesk.desktop || fail "desktop-file-validate"; }
# lintian refuses nothing as root but says so; errors (E:) fail the test, warnings are shown.
lintian_out="$(lintian --allow-root --fail-on none "$deb" 2>&1)"
[ -n "$lintian_out" ] && sed 's/^/package test: lintian: /' <<<"$lintian_out"
grep -q '^E: ' <<<"$lintian_out" && fail "lintian reports errors"

echo "package test: passed in $((SECONDS - started)) s"
