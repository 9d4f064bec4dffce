#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpufracd on a real NVIDIA GPU: burst beyond the request through the agent,
# and sm-sharing with the agent's own MPS daemon (SM share seen by torch).
#
#   tests/gpu/agent_check.sh BUILD_DIR [OUT_DIR]
#
# Prints key=value figures and PASS/FAIL lines; exit 0 all passed, 1 a
# failure, 77 no GPU / no torch.
set -u
BUILD=$(cd "${1:-build}" && pwd)
OUT_DIR=${2:-${OUT:-./gpu-out}/agent}
PY=${PYTHON:-python3}
DEV=${GPU_TEST_DEVICE:-0}
mkdir -p "$OUT_DIR"

if ! { [ -e /dev/nvidia0 ] && timeout 60 nvidia-smi -L >/dev/null 2>&1; }; then
    echo "SKIP: no NVIDIA GPU present"
    exit 77
fi
if ! timeout 300 "$PY" -c "import torch" >/dev/null 2>&1; then
    echo "SKIP: torch is not importable"
    exit 77
fi

STATE=$(mktemp -d /tmp/gfa.XXXXXX)
FAILED=0
"$BUILD/bin/gpufracd" --state-dir "$STATE" --metrics-listen 127.0.0.1:0 \
    --watchdog-period-ms 500 >"$OUT_DIR/agent.log" 2>&1 &
AGENT=$!
trap 'kill "$AGENT" 2>/dev/null; wait "$AGENT" 2>/dev/null; rm -rf "$STATE"' EXIT
for _ in $(seq 100); do
    grep -q "ready:" "$OUT_DIR/agent.log" && break
    sleep 0.1
done

check() { # NAME CMD...: PASS when CMD exits 0
    local name=$1
    shift
    if timeout 600 "$@" >"$OUT_DIR/$name.log" 2>&1; then
        echo "PASS $name $(grep -E '^[a-z_]+=' "$OUT_DIR/$name.log" | tr '\n' ' ')"
    else
        echo "FAIL $name (log: $OUT_DIR/$name.log)"
        FAILED=$((FAILED + 1))
    fi
}

# 2 GiB guaranteed, up to 8 GiB on loan: 6 GiB must fit, 9 GiB must not
check burst "$BUILD/bin/gpufrac" run --state-dir "$STATE" --devices "$DEV" --memory 2Gi \
    --limit 8Gi -- "$PY" -c '
import torch
a = torch.empty(6 << 30, dtype=torch.uint8, device="cuda")
print("burst_6gib=ok")
try:
    b = torch.empty(3 << 30, dtype=torch.uint8, device="cuda")
    raise SystemExit("9 GiB fitted in an 8 GiB limit")
except torch.OutOfMemoryError:
    print("burst_past_limit=refused")
'

# sm-sharing through the agent: its MPS daemon, a quarter of the SMs
check sm_sharing "$BUILD/bin/gpufrac" run --state-dir "$STATE" --devices "$DEV" --memory 4Gi \
    --mode sm-sharing --compute 0.25 -- "$PY" -c '
import os, torch
full = int(os.environ.get("FULL_SMS", "0"))
sms = torch.cuda.get_device_properties(0).multi_processor_count
print("pipe=%s" % os.environ["CUDA_MPS_PIPE_DIRECTORY"])
print("sms=%d" % sms)
total = torch.cuda.mem_get_info()[1]
print("total=%d" % total)
assert total == 4 << 30, total
'
grep -q "sms=" "$OUT_DIR/sm_sharing.log" && echo "note: H200 expectation 32 of 132 SMs"
cp "$STATE/events.log" "$OUT_DIR/" 2>/dev/null
[ "$FAILED" -eq 0 ]
