#!/usr/bin/env bash
# Regenerates the desktop app's screenshots in docs/screenshots/: builds ui_screenshots, then runs a
# scripted session on the demo model under Xvfb (the X11 platform plugin, as users see it), or on
# Qt's offscreen platform when Xvfb is missing. Usage: tools/screenshots.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
build="${1:-build/release}"
out=docs/screenshots
cmake --build "$build" --target ui_screenshots
mkdir -p "$out"
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d /tmp/flashdesk-xdg.XXXXXX)}"
chmod 700 "$XDG_RUNTIME_DIR"
if command -v xvfb-run >/dev/null; then
  xvfb-run -a -s "-screen 0 1280x800x24" "$build/tests/ui/ui_screenshots" "$out"
else
  QT_QPA_PLATFORM=offscreen "$build/tests/ui/ui_screenshots" "$out"
fi
