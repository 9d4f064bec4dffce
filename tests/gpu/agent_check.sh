#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpufracd on the suite's GPU (a real one, or gpusim in the dry run): each
# mode starts its own agent in a private state directory and stops it.
#
#   tests/gpu/agent_check.sh BUILD_DIR OUT_DIR MODE
#
#   reclaim   burst: a fraction of 1 GiB with a limit near the device borrows
#             all but 10 GiB of it (a loan above --memory), and is refused past
#             its limit; then a fraction guaranteed 14 GiB allocates 12 GiB: the
#             driver runs out, the agent takes the loan back by ending the
#             borrower, whose `gpufrac run` exits 75 and says why (evicted, the
#             loan, the fraction it went to), and the owner's allocation succeeds
#   watchdog  a process of a 1 GiB fraction that drops the preload and takes
#             4 GiB is killed by the watchdog; its `gpufrac run` exits 76 and
#             says why
#   sm        sm-sharing through the agent's MPS daemon: a 0.25 fraction's
#             torch sees fewer SMs and a total of 4 GiB (needs torch)
#
# The agent needs pidfds (pidfd_open), /proc/<pid>/{stat,status} of other
# processes with NSpid, and NVML listing this sandbox's pids; where one is
# missing the mode prints "SKIP: missing ..." naming it and exits 77 rather
# than failing. Prints key=value figures; exit 0 passed, 1 failed, 77 skipped.
# Environment: PYTHON, GPU_TEST_DEVICE (0), DEVICE_MIB (the device's total MiB,
# else read from nvidia-smi), GPU_AGENT_MPS_CONTROL (the agent's --mps-control).
set -u
BUILD=$(cd "${1:?BUILD_DIR}" && pwd)
OUT_DIR=${2:?OUT_DIR}
MODE=${3:?MODE: reclaim, watchdog or sm}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PY=${PYTHON:-python3}
DEV=${GPU_TEST_DEVICE:-0}
GPUFRAC="$BUILD/bin/gpufrac"
mkdir -p "$OUT_DIR" || exit 1

# missing: what the agent needs that this sandbox lacks, one per line.
missing() {
    "$PY" - <<'PYEOF'
import os, subprocess, sys
out = []
try:
    os.close(os.pidfd_open(os.getpid()))
except (AttributeError, OSError) as e:
    out.append("pidfd_open (%s)" % (getattr(e, "strerror", None) or e))
child = subprocess.Popen(["sleep", "30"])
try:
    with open("/proc/%d/stat" % child.pid) as f:
        f.read()
    with open("/proc/%d/status" % child.pid) as f:
        if not any(ln.startswith("NSpid:") for ln in f):
            out.append("NSpid in /proc/<pid>/status")
except OSError as e:
    out.append("/proc/<pid>/stat|status of a child (%s)" % e.strerror)
finally:
    child.kill()
    child.wait()
print("\n".join(out))
PYEOF
}

# lists: can NVML see this sandbox's pids (the watchdog's attribution)?
nvml_lists_pids() {
    "$PY" "$HERE/cuprobe.py" nvml 2>/dev/null | grep -q '^nvml_lists_self=1'
}

device_mib() {
    if [ -n "${DEVICE_MIB:-}" ]; then
        echo "$DEVICE_MIB"
        return
    fi
    timeout 60 nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i "$DEV" |
        head -n1 | tr -dc '0-9'
}

NEEDS=$(missing)
STATE=$(mktemp -d /tmp/gfa.XXXXXX)
chmod 0755 "$STATE"
AGENT=""
cleanup() {
    if [ -n "$AGENT" ]; then
        kill "$AGENT" 2>/dev/null
        wait "$AGENT" 2>/dev/null
    fi
    cp "$STATE/events.log" "$OUT_DIR/events.$MODE.log" 2>/dev/null
    rm -rf "$STATE"
}
trap cleanup EXIT

# skip_or_fail WHY: a failure where the sandbox lacks what the agent needs is a
# SKIP naming it; otherwise a FAIL.
skip_or_fail() {
    if [ -n "$NEEDS" ]; then
        echo "SKIP: missing $(echo "$NEEDS" | paste -sd ';' -) (the agent needs it; $1)"
        exit 77
    fi
    echo "FAIL: $1"
    exit 1
}

start_agent() {
    local mps=()
    [ -n "${GPU_AGENT_MPS_CONTROL:-}" ] && mps=(--mps-control "$GPU_AGENT_MPS_CONTROL")
    "$BUILD/bin/gpufracd" --state-dir "$STATE" --metrics-listen 127.0.0.1:0 \
        --watchdog-period-ms 500 ${mps[@]+"${mps[@]}"} >"$OUT_DIR/agent.$MODE.log" 2>&1 &
    AGENT=$!
    for _ in $(seq 150); do
        grep -q "ready:" "$OUT_DIR/agent.$MODE.log" && return 0
        kill -0 "$AGENT" 2>/dev/null || break
        sleep 0.1
    done
    skip_or_fail "the agent did not get ready: $(tail -n1 "$OUT_DIR/agent.$MODE.log")"
}

# run_bg NAME LOG gpufrac-run-flags -- CMD...: a fraction in the background
frac_bg() {
    local log=$1
    shift
    "$GPUFRAC" run --state-dir "$STATE" --devices "$DEV" "$@" >"$log" 2>&1 &
}

gone() { ! kill -0 "$1" 2>/dev/null; }

wait_for() { # SECONDS CMD...: polls CMD every 0.1 s
    local n=$(($1 * 10))
    shift
    for _ in $(seq "$n"); do
        "$@" && return 0
        sleep 0.1
    done
    return 1
}

reclaim() {
    local mib borrow limit b_log="$OUT_DIR/reclaim.borrower.log" o_log="$OUT_DIR/reclaim.owner.log"
    mib=$(device_mib)
    if [ -z "$mib" ] || [ "$mib" -lt 16384 ]; then
        echo "FAIL: device total '$mib' MiB (want >= 16 GiB)"
        exit 1
    fi
    borrow=$((mib - 10240))
    limit=$((mib - 2048))
    echo "device_mib=$mib borrower_memory=1024Mi borrower_limit=${limit}Mi borrowed_alloc=${borrow}Mi"
    start_agent
    # the borrower: its loan, then a refusal past its limit, then it holds
    frac_bg "$b_log" --name borrower --memory 1Gi --limit "${limit}Mi" -- \
        "$PY" "$HERE/cuprobe.py" alloc "${borrow}Mi" alloc 9Gi info hold 120
    local pb=$!
    wait_for 60 grep -q '^holding=' "$b_log" || {
        kill "$pb" 2>/dev/null
        skip_or_fail "the borrower did not get its loan (log: $b_log)"
    }
    grep -q '^alloc=ok' "$b_log" || skip_or_fail "the borrow of ${borrow} MiB failed (log: $b_log)"
    if [ "$(grep -c '^alloc=' "$b_log")" -ne 2 ] || ! sed -n 2p <(grep '^alloc=' "$b_log") |
        grep -q CUDA_ERROR_OUT_OF_MEMORY; then
        echo "FAIL: 9 GiB more, past the borrower's limit, was not refused (log: $b_log)"
        exit 1
    fi
    echo "burst_borrowed_mib=$((borrow - 1024)) burst_past_limit=refused"
    # the owner: its guaranteed memory is on loan
    local t0 t1 rc_o rc_b
    t0=$(date +%s%N)
    timeout 120 "$GPUFRAC" run --state-dir "$STATE" --devices "$DEV" --name owner --memory 14Gi \
        -- "$PY" "$HERE/cuprobe.py" alloc 12Gi info >"$o_log" 2>&1
    rc_o=$?
    t1=$(date +%s%N)
    if wait_for 30 gone "$pb"; then
        wait "$pb"
        rc_b=$?
    else
        kill "$pb" 2>/dev/null
        wait "$pb"
        rc_b="still-running"
    fi
    echo "owner_exit=$rc_o borrower_exit=$rc_b reclaim_ms=$(((t1 - t0) / 1000000))"
    grep -q '^alloc=ok' "$o_log" || skip_or_fail "the owner's 12 GiB was not given back (exit $rc_o, log: $o_log)"
    grep -q "reclaim: terminated pid" "$STATE/events.log" ||
        { echo "FAIL: no reclaim in events.log"; exit 1; }
    local why
    why=$(grep -o 'evicted by gpufracd: .*' "$b_log" | head -n1)
    echo "eviction_reason=\"$why\""
    if [ "$rc_b" != 75 ] || ! echo "$why" | grep -q 'was taken back for fraction "owner"'; then
        echo "FAIL: the borrower exited $rc_b without the eviction's reason (log: $b_log)"
        exit 1
    fi
}

watchdog() {
    local log="$OUT_DIR/watchdog.leaky.log" rc t0 t1
    nvml_lists_pids || NEEDS="${NEEDS:+$NEEDS
}NVML listing this sandbox's pids (nvmlDeviceGetComputeRunningProcesses_v3)"
    start_agent
    t0=$(date +%s%N)
    timeout 90 "$GPUFRAC" run --state-dir "$STATE" --devices "$DEV" --name leaky --memory 1Gi \
        -- env -u LD_PRELOAD "$PY" "$HERE/cuprobe.py" alloc 4Gi hold 60 >"$log" 2>&1
    rc=$?
    t1=$(date +%s%N)
    echo "leaky_exit=$rc seconds_to_end=$(((t1 - t0) / 1000000000))"
    grep -q "watchdog: killed pid" "$STATE/events.log" 2>/dev/null ||
        skip_or_fail "the watchdog killed nothing (exit $rc, log: $log)"
    grep -o "terminated by gpufracd's watchdog: .*" "$log" | head -n1 | sed 's/^/watchdog_reason=/'
    [ "$rc" -eq 76 ] || { echo "FAIL: gpufrac run exited $rc, not 76 (log: $log)"; exit 1; }
}

sm() {
    if [ "${GPU_SUITE_SIM:-0}" = 1 ]; then
        echo "SKIP: torch needs a real driver (dry run on gpusim)"
        exit 77
    fi
    if ! timeout 120 "$PY" -c "import torch" >/dev/null 2>&1; then
        echo "SKIP: torch not importable"
        exit 77
    fi
    if ! command -v nvidia-cuda-mps-control >/dev/null 2>&1 &&
        [ ! -x /usr/local/nvidia/bin/nvidia-cuda-mps-control ] && [ -z "${GPU_AGENT_MPS_CONTROL:-}" ]; then
        echo "SKIP: missing nvidia-cuda-mps-control (MPS) on PATH and in /usr/local/nvidia/bin"
        exit 77
    fi
    start_agent
    timeout 120 "$GPUFRAC" run --state-dir "$STATE" --devices "$DEV" --memory 4Gi \
        --mode sm-sharing --compute 0.25 -- "$PY" -c '
import os, torch
sms = torch.cuda.get_device_properties(0).multi_processor_count
print("pipe=%s" % os.environ["CUDA_MPS_PIPE_DIRECTORY"])
print("sms=%d" % sms)
total = torch.cuda.mem_get_info()[1]
print("total=%d" % total)
assert total == 4 << 30, total
' >"$OUT_DIR/sm.log" 2>&1 || skip_or_fail "sm-sharing run failed (log: $OUT_DIR/sm.log)"
    grep -E '^(sms|total)=' "$OUT_DIR/sm.log"
    echo "note=H200 expectation 32 of 132 SMs"
}

echo "agent_missing=\"$(echo "$NEEDS" | paste -sd ';' -)\""
case $MODE in
reclaim | watchdog | sm) "$MODE" ;;
*)
    echo "agent_check.sh: unknown mode '$MODE'" >&2
    exit 2
    ;;
esac
echo "result=pass"
