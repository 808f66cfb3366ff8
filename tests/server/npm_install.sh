#!/bin/sh
# Installs the openai npm client of the server test (ctest server_openai_client) into DIR with
# `npm ci` from the committed lock file; does nothing when DIR already holds that lock's install.
# Without the npm registry (offline) it fails and says why: the client test must not pass unrun.
set -eu
dir=$1
cd "$dir"
if [ -f node_modules/.flashdesk-lock ] && cmp -s package-lock.json node_modules/.flashdesk-lock; then
  echo "npm_install: openai client already installed in $dir"
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "npm_install: npm not found; install Debian's nodejs and npm (./setup.sh does)" >&2
  exit 1
fi
if ! npm ci --no-audit --no-fund --loglevel=error --fetch-retries=1 --fetch-timeout=60000; then
  echo "npm_install: 'npm ci' failed in $dir: the openai client test needs the npm registry" \
       "(registry.npmjs.org, or an npm cache holding the packages of package-lock.json)" >&2
  exit 1
fi
cp package-lock.json node_modules/.flashdesk-lock
