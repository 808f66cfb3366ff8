#!/bin/sh
# Reliability run of issue 5 item 7 (engine side): kill -9 of `flashdesk-cli chat --session` at
# random moments, 25 rounds over one session, then resume (tests/storage/chat_kill9_test.cpp).
# Usage: tests/storage/chat_kill9.sh [build dir, default build/release] [rounds, default 25]
set -e
BUILD=${1:-build/release}
FD_KILL9_ROUNDS=${2:-25} "$BUILD/tests/storage_tests" --gtest_filter='ChatKill9.*:Kill9.*:DiskFull*.*:SessionResume.Corrupt*:SessionResume.Changed*'
