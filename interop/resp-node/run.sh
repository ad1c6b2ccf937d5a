#!/usr/bin/env bash
# Runs the BullMQ interop suite: installs the pinned packages from the lock file (from npm's
# cache when it has it), then runs bullmq.test.mjs against a release weft that ../with_weft.py
# starts on a free port (it sets WEFT_PORT; WEFT_BIN picks another binary).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
npm ci --silent --prefer-offline --no-audit --no-fund
# --test-force-exit: a connection left open must not keep the run alive.
python3 ../with_weft.py -- node --test --test-concurrency=1 --test-force-exit bullmq.test.mjs
