#!/usr/bin/env bash
# The headless browser the report's browser test opens pages in: Debian's `chromium` package.
# Installed only where it is missing and we may install it (root with apt-get); anywhere else
# this says why and succeeds, and the test skips with the same reason.
set -euo pipefail
for name in chromium chromium-browser; do
    if command -v "$name" >/dev/null 2>&1; then
        exit 0
    fi
done
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure_chromium: no chromium, and not root with apt-get: the browser test will skip" >&2
    exit 0
fi
echo "ensure_chromium: installing Debian's chromium (once)" >&2
export DEBIAN_FRONTEND=noninteractive
if apt-get install -y -qq chromium >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq chromium >/dev/null 2>&1; }; then
    exit 0
fi
echo "ensure_chromium: apt-get could not install chromium: the browser test will skip" >&2
