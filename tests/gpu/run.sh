#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The GPU suite: gpufrac on a machine with a real NVIDIA GPU.
#
#   tests/gpu/run.sh [BUILD_DIR] [OUT_DIR]      (defaults: build, $OUT or ./gpu-out)
#
# Without a GPU (no /dev/nvidia0, or `nvidia-smi -L` fails) it prints
# "SKIP: no NVIDIA GPU present" and exits 77 (CTest: SKIP_RETURN_CODE).
# With one it runs every check under `gpufrac run`, keeps each step's log in
# OUT_DIR/<step>.log, the benchmark in OUT_DIR/bench.txt (+ bench.json), and
# writes OUT_DIR/summary.txt: one PASS/FAIL/SKIP line per check with its
# figures. Exit 0 when nothing failed, 1 otherwise, 2 for a usage error.
#
# Environment: PYTHON (python3), GPU_TEST_LIMIT (8Gi), GPU_TEST_DEVICE (0),
# GPU_STEP_TIMEOUT (seconds per step, 600), GPU_BENCH_TIMEOUT (900),
# GPU_BENCH_ARGS (extra gpufrac-bench flags, e.g. --quick), GPU_TRAIN_STEPS (200).
set -u
set -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUILD_ARG=${1:-build}
OUT_DIR=${2:-${OUT:-./gpu-out}}
PY=${PYTHON:-python3}
LIMIT=${GPU_TEST_LIMIT:-8Gi}
DEV=${GPU_TEST_DEVICE:-0}
STEP_TIMEOUT=${GPU_STEP_TIMEOUT:-600}
BENCH_TIMEOUT=${GPU_BENCH_TIMEOUT:-900}

if [ $# -gt 2 ] || [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
    sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'
    [ $# -gt 2 ] && exit 2
    exit 0
fi

gpu_present() {
    [ -e /dev/nvidia0 ] || return 1
    command -v nvidia-smi >/dev/null 2>&1 || return 1
    timeout 60 nvidia-smi -L >/dev/null 2>&1
}

# GPU_SUITE_FORCE=1 skips the detection (dry runs of this script on gpusim).
if [ "${GPU_SUITE_FORCE:-0}" != 1 ] && ! gpu_present; then
    echo "SKIP: no NVIDIA GPU present"
    exit 77
fi

if ! BUILD=$(cd "$BUILD_ARG" 2>/dev/null && pwd); then
    echo "run.sh: build directory '$BUILD_ARG' does not exist (build first, or pass BUILD_DIR)" >&2
    exit 2
fi
mkdir -p "$OUT_DIR" || exit 2
OUT_DIR=$(cd "$OUT_DIR" && pwd)
GPUFRAC="$BUILD/bin/gpufrac"
BENCH="$BUILD/bin/gpufrac-bench"
SUMMARY="$OUT_DIR/summary.txt"
# fractions made by this run live here, not in /run/gpufrac
export GPUFRAC_STATE_DIR="$OUT_DIR/state"
export PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH="$HERE${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$GPUFRAC_STATE_DIR"
: >"$SUMMARY"
FAILED=0

# record NAME STATUS DETAIL: one summary line, echoed as well.
record() {
    printf '%-5s %-22s %s\n' "$2" "$1" "$3" | tee -a "$SUMMARY"
    [ "$2" = FAIL ] && FAILED=$((FAILED + 1))
    return 0
}

# figures LOG: the key=value lines of a log, on one line.
figures() {
    grep -E '^[A-Za-z0-9_.]+=' "$1" 2>/dev/null | grep -Ev '^(result|exit)=' | tr '\n' ' ' | cut -c1-1500
}

# step NAME TIMEOUT CMD...: runs CMD with its output in OUT_DIR/NAME.log.
step() {
    local name=$1 limit=$2 log="$OUT_DIR/$1.log" rc
    shift 2
    printf '$ %s\n' "$*" >"$log"
    echo "== $name" >&2
    timeout --kill-after=15 "$limit" "$@" >>"$log" 2>&1
    rc=$?
    echo "exit=$rc" >>"$log"
    case $rc in
    0) record "$name" PASS "$(figures "$log")" ;;
    124 | 137) record "$name" FAIL "timed out after ${limit}s (log: $log) $(figures "$log")" ;;
    *) record "$name" FAIL "exit $rc (log: $log) $(figures "$log")" ;;
    esac
}

# frac_step NAME MEMORY CMD...: a step whose CMD runs inside a fresh fraction
# of MEMORY on the test GPU.
frac_step() {
    local name=$1 mem=$2
    shift 2
    step "$name" "$STEP_TIMEOUT" "$GPUFRAC" run --memory "$mem" --devices "$DEV" -- "$@"
}

# importable MODULE: can Python import it outside any fraction?
importable() {
    timeout 300 "$PY" -c "import $1" >"$OUT_DIR/import-$1.log" 2>&1
}

environment() {
    {
        echo "date: $(date -u +%FT%TZ)"
        echo "host: $(uname -a)"
        echo "build: $BUILD"
        echo "git: $(git -C "$HERE" rev-parse --short HEAD 2>/dev/null || echo unknown)"
        timeout 60 nvidia-smi -L
        timeout 60 nvidia-smi --query-gpu=index,name,uuid,memory.total,driver_version \
            --format=csv
        "$PY" --version
        for m in torch cupy jax pynvml; do
            "$PY" -c "import $m; print('$m', getattr($m, '__version__', '?'))" 2>/dev/null ||
                echo "$m: not importable"
        done
    } >"$OUT_DIR/environment.log" 2>&1
}

check_build() {
    local f ok=1
    for f in "$GPUFRAC" "$BENCH" "$BUILD/lib/libgpufrac.so"; do
        if [ ! -x "$f" ] && [ ! -f "$f" ]; then
            record build FAIL "missing $f"
            ok=0
        fi
    done
    [ $ok = 1 ] && record build PASS "$BUILD"
    [ $ok = 1 ]
}

# NVML's own total of the test GPU in MiB, outside any fraction.
device_total_mib() {
    timeout 60 nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i "$DEV" |
        head -n1 | tr -dc '0-9'
}

torch_checks() {
    if ! importable torch; then
        record torch SKIP "PyTorch not importable outside a fraction (see import-torch.log)"
        return
    fi
    frac_step torch.limits "$LIMIT" "$PY" "$HERE/torch_probe.py" limits
    frac_step torch.share "$LIMIT" "$PY" "$HERE/torch_probe.py" share
    local mib
    mib=$(device_total_mib)
    if [ -z "$mib" ]; then
        record torch.portion FAIL "could not read the device's memory.total from nvidia-smi"
        return
    fi
    frac_step torch.portion 0.5 "$PY" "$HERE/torch_probe.py" portion "$mib"
}

optional_checks() {
    frac_step nvml "$LIMIT" "$PY" "$HERE/nvml_probe.py"
    if importable cupy; then
        frac_step cupy "$LIMIT" "$PY" "$HERE/cupy_probe.py"
    else
        record cupy SKIP "CuPy not importable"
    fi
    if importable jax; then
        frac_step jax "$LIMIT" env XLA_PYTHON_CLIENT_PREALLOCATE=false "$PY" "$HERE/jax_probe.py"
    else
        record jax SKIP "JAX not importable"
    fi
}

# The footprint as the driver measures it (docs/footprint.md): context
# overhead per process and what the shim charged for it, the 8 x 4 race
# sampled through NVML, and a PyTorch process's NVML footprint against its
# charge.
footprint_checks() {
    frac_step footprint.ctx 2Gi "$PY" "$HERE/footprint_probe.py" ctx
    frac_step footprint.race 4Gi "$PY" "$HERE/footprint_probe.py" race 8 4 64
}

# value KEY LOG: a key=value figure from a step's log.
value() {
    grep -E "^$1=" "$2" 2>/dev/null | tail -n1 | cut -d= -f2
}

# ratio A B: A / B with three decimals ("" when either is missing).
ratio() {
    [ -n "$1" ] && [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b }'
}

# A training step (small transformer, fixed seed and batch) under gpufrac
# against none, in the same run; then two processes at 0.5 each in
# sm-sharing against one alone. Throughput figures, not assertions: the
# targets (ratio <= 1.01; shared throughput per process kept) are recorded
# as met or missed.
training_checks() {
    if ! importable torch; then
        record train SKIP "PyTorch not importable outside a fraction"
        return
    fi
    local steps=${GPU_TRAIN_STEPS:-200} bare frac r
    step train.bare "$STEP_TIMEOUT" "$PY" "$HERE/torch_train.py" "$steps"
    frac_step train.gpufrac "$LIMIT" "$PY" "$HERE/torch_train.py" "$steps"
    bare=$(value step_ms "$OUT_DIR/train.bare.log")
    frac=$(value step_ms "$OUT_DIR/train.gpufrac.log")
    r=$(ratio "$frac" "$bare")
    if [ -z "$r" ]; then
        record train.ratio FAIL "no step times (logs: train.bare.log, train.gpufrac.log)"
    else
        record train.ratio PASS "step_ms_bare=$bare step_ms_gpufrac=$frac ratio=$r target=$(awk -v r="$r" 'BEGIN { print (r <= 1.01) ? "met" : "missed" }')"
    fi
    # sm-sharing: one 0.5 fraction alone, then two at once
    step train.sm.alone "$STEP_TIMEOUT" "$GPUFRAC" run --mode sm-sharing --compute 0.5 \
        --memory "$LIMIT" --devices "$DEV" -- "$PY" "$HERE/torch_train.py" "$steps"
    local a_log="$OUT_DIR/train.sm.a.log" b_log="$OUT_DIR/train.sm.b.log" pa pb ra rb alone
    echo "== train.sm.shared" >&2
    timeout --kill-after=15 "$STEP_TIMEOUT" "$GPUFRAC" run --name train-a --mode sm-sharing \
        --compute 0.5 --memory "$LIMIT" --devices "$DEV" -- "$PY" "$HERE/torch_train.py" "$steps" \
        >"$a_log" 2>&1 &
    pa=$!
    timeout --kill-after=15 "$STEP_TIMEOUT" "$GPUFRAC" run --name train-b --mode sm-sharing \
        --compute 0.5 --memory "$LIMIT" --devices "$DEV" -- "$PY" "$HERE/torch_train.py" "$steps" \
        >"$b_log" 2>&1 &
    pb=$!
    wait "$pa"
    ra=$?
    wait "$pb"
    rb=$?
    alone=$(value steps_per_s "$OUT_DIR/train.sm.alone.log")
    local sa sb
    sa=$(value steps_per_s "$a_log")
    sb=$(value steps_per_s "$b_log")
    if [ $ra -ne 0 ] || [ $rb -ne 0 ] || [ -z "$sa" ] || [ -z "$sb" ] || [ -z "$alone" ]; then
        record train.sm.shared FAIL "exit $ra/$rb (logs: $a_log $b_log)"
    else
        record train.sm.shared PASS "steps_per_s_alone=$alone steps_per_s_a=$sa steps_per_s_b=$sb kept_a=$(ratio "$sa" "$alone") kept_b=$(ratio "$sb" "$alone")"
    fi
}

status_check() {
    # a fraction's status must be readable as JSON while nothing runs in it
    # shellcheck disable=SC2016 # expanded by the inner sh
    step status "$STEP_TIMEOUT" sh -c '"$1" status --json | "$2" -c "import json,sys; json.load(sys.stdin); print(\"json=ok\")"' \
        sh "$GPUFRAC" "$PY"
}

bench() {
    local log="$OUT_DIR/bench.txt" rc args
    read -r -a args <<<"${GPU_BENCH_ARGS:-}"
    echo "== bench" >&2
    timeout --kill-after=15 "$BENCH_TIMEOUT" "$BENCH" ${args[@]+"${args[@]}"} --json "$OUT_DIR/bench.json" \
        >"$log" 2>&1
    rc=$?
    local keys
    keys=$(grep -E '^(platform|device_name|pairs_added_ns|pairs_ratio|contended_ratio|big_contended_median_us_(no)?shim|big_uncontended_median_us_(no)?shim|launch_ratio|launch_status|startup_added_ms)=' \
        "$log" | tr '\n' ' ')
    if [ $rc -eq 0 ]; then
        record bench PASS "$keys(table: $log)"
    else
        record bench FAIL "exit $rc (log: $log) $keys"
    fi
}

# extra SCRIPT NAME: a check script of its own (77 = skipped).
extra() {
    local script=$1 name=$2 log="$OUT_DIR/$2.log" rc
    shift 2
    echo "== $name" >&2
    timeout --kill-after=15 1200 "$script" "$@" >"$log" 2>&1
    rc=$?
    case $rc in
    0) record "$name" PASS "$(figures "$log")" ;;
    77) record "$name" SKIP "$(tail -1 "$log")" ;;
    *) record "$name" FAIL "exit $rc (log: $log)" ;;
    esac
}

main() {
    environment
    echo "gpufrac GPU suite: build $BUILD, output $OUT_DIR" >&2
    if check_build; then
        torch_checks
        footprint_checks
        training_checks
        optional_checks
        status_check
        extra "$HERE/mps_check.sh" mps "$OUT_DIR/mps"
        extra "$HERE/agent_check.sh" agent "$BUILD" "$OUT_DIR/agent"
        bench
    fi
    {
        echo
        echo "failed=$FAILED passed=$(grep -c '^PASS' "$SUMMARY") skipped=$(grep -c '^SKIP' "$SUMMARY")"
    } | tee -a "$SUMMARY"
    [ "$FAILED" -eq 0 ]
}

main
