#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The GPU suite: gpufrac on a machine with a real NVIDIA GPU, within a time
# budget, most valuable checks first; every figure of one run lands in
# OUT_DIR/summary.txt, rewritten after each step.
#
#   tests/gpu/run.sh [BUILD_DIR] [OUT_DIR]   run the selected steps
#   tests/gpu/run.sh --plan                  print the steps, their order and budget
#
# BUILD_DIR: the argument, else $GPUFRAC_BUILD, else ./build, else ./build-rel
# (the first with bin/gpufrac); it must hold a built tree (bin/gpufrac,
# bin/gpufracd, bin/gpufrac-bench, lib/libgpufrac.so): the GPU machine has no
# compiler. OUT_DIR: the argument, else $OUT, else ./gpu-out. On a lent machine:
#   GPU_SUITE_BUDGET=420 OUT=$OUT tests/gpu/run.sh build-rel
#
# Without a GPU (no /dev/nvidia0, or `nvidia-smi -L` fails) it prints
# "SKIP: no NVIDIA GPU present" and exits 77 (CTest: SKIP_RETURN_CODE).
# Each step's log is OUT_DIR/<step>.log; summary.txt has one line per step,
# "STATUS step detail" (PASS, FAIL, or SKIP with what was missing), a header
# of '#' lines (each run's date, machine, driver) and a totals line.
#
# Budget: the whole run ends within GPU_SUITE_BUDGET seconds (420). A step
# starts only if what is left covers its expected time, and its timeout is the
# smaller of its cap and what is left. A step not started, or stopped, for
# lack of budget is "SKIP budget: ...".
# Resume: with OUT_DIR/summary.txt present, steps it already records (other
# than budget skips) are not run again; GPU_SUITE_FRESH=1 starts over. (On a
# fresh machine, copy the last run's summary.txt into OUT_DIR first.)
# GPU_STEPS=name,name runs only those steps (a name, or a prefix such as
# "torch" for torch.*), again even if recorded; an unknown name is exit 2.
#
# Dry run: GPU_SUITE_FORCE=1 runs the script's logic on the build's gpusim
# (lib/gpusim, GPUSIM_DEVICES=${GPU_SIM_DEVICES:-16Gi}, a state file in
# OUT_DIR, tests/gpu/sim/nvidia-smi on PATH, small counts); every probe that
# needs a real framework SKIPs by name (GPU_SUITE_SIM=1 tells it).
#
# Non-root: when run as root, step "nonroot" repeats the limit check as user
# nobody (runuser); run as another user, the whole run is the non-root run
# and "nonroot" says so. Nothing needs strace, gdb or perf, or writes under
# /usr/local/nvidia; fractions live in a /tmp directory, not /run/gpufrac.
#
# Exit 0 when no step failed, 1 otherwise, 2 for a usage error.
# Environment: PYTHON (python3), GPU_TEST_LIMIT (8Gi), GPU_TEST_DEVICE (0),
# GPU_BENCH_ARGS (extra gpufrac-bench flags), GPU_TRAIN_STEPS (100),
# GPU_RACE_SECONDS (15).
set -u
set -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PY=${PYTHON:-python3}
LIMIT=${GPU_TEST_LIMIT:-8Gi}
DEV=${GPU_TEST_DEVICE:-0}
BUDGET=${GPU_SUITE_BUDGET:-420}
SIM=0
[ "${GPU_SUITE_FORCE:-0}" = 1 ] && SIM=1
RESERVE=10 # seconds kept for the last summary and a step's kill

# The plan, in order of value: group step expected-seconds cap-seconds what.
# Expected times are for an H200; their sum stays within the default budget
# (tests/gpu/test_dry_run.py checks it).
PLAN='
0 build              1  10 the build tree has the binaries
0 env                4  40 machine, driver, sandbox, frameworks (no imports)
1 torch.limits      18  60 PyTorch: mem_get_info, total_memory = limit; OOM past it
1 torch.share       22  75 PyTorch: two processes share one limit
1 torch.footprint   18  60 PyTorch: context + cuBLAS + allocations by NVML <= limit
1 torch.portion     12  45 PyTorch: --memory 0.5 is half the device
1 footprint.ctx      6  40 driver: context overhead by NVML = charge
1 footprint.race    22  60 driver: 8 x 4 racing threads by NVML <= limit
1 nonroot           14  45 the limit holds for a non-root user
2 nvml               5  30 NVML / nvidia-smi inside a fraction show the fraction
3 cupy              14  45 CuPy: memGetInfo total = limit, OOM past it
3 jax.noprealloc    18  60 JAX, XLA_PYTHON_CLIENT_PREALLOCATE=false
3 jax.prealloc      18  60 JAX, XLA_PYTHON_CLIENT_PREALLOCATE=true
3 numba             18  60 numba: detect, exact round trips, OOM past the limit, 2 processes, IPC charged once
4 status             2  15 gpufrac status --json
4 agent.reclaim     20  60 agent: burst borrowed, reclaimed, eviction reason
4 agent.watchdog    14  45 agent: the watchdog kills a process without the preload
5 overhead.bench    40 120 gpufrac-bench: pairs, 8 processes, 256 MiB, launch, start-up
5 overhead.calls    18  60 alloc+free 1 and 8 threads, cuMemGetInfo, interleaved
5 overhead.train    40 120 PyTorch training step, gpufrac against none, interleaved
6 mps               20  60 MPS in this sandbox: SM share, pinned limit, terminate
6 sm.agent          12  45 sm-sharing through the agent MPS daemon
6 sm.train          34  90 sm-sharing: 2 x 0.5 against one alone
'

plan_names() { echo "$PLAN" | awk 'NF { print $2 }'; }
plan_field() { echo "$PLAN" | awk -v s="$1" -v f="$2" '$2 == s { print $f }'; }

usage() {
    sed -n '2,45p' "$0" | sed 's/^# \{0,1\}//'
}

# selected NAME: is NAME in GPU_STEPS (or is GPU_STEPS unset)? build and env
# run every time.
selected() {
    local want
    [ -z "${GPU_STEPS:-}" ] && return 0
    case $1 in build | env) return 0 ;; esac
    for want in ${GPU_STEPS//,/ }; do
        [ "$1" = "$want" ] || [ "${1#"$want".}" != "$1" ] && return 0
    done
    return 1
}

check_steps() {
    local want name hit
    for want in ${GPU_STEPS//,/ }; do
        hit=0
        for name in $(plan_names); do
            if [ "$name" = "$want" ] || [ "${name#"$want".}" != "$name" ]; then hit=1; fi
        done
        if [ $hit = 0 ]; then
            echo "run.sh: GPU_STEPS names '$want', not a step (run.sh --plan lists them)" >&2
            exit 2
        fi
    done
}

print_plan() {
    local t=0
    printf '%-5s %-5s %-16s %8s %5s %8s  %s\n' order group step expect_s cap_s start_s what
    echo "$PLAN" | awk 'NF' | {
        i=0
        while read -r g name exp cap what; do
            i=$((i + 1))
            local mark=""
            selected "$name" || mark=" (not in GPU_STEPS)"
            printf '%-5s %-5s %-16s %8s %5s %8s  %s%s\n' "$i" "$g" "$name" "$exp" "$cap" "$t" \
                "$what" "$mark"
            selected "$name" && t=$((t + exp))
        done
        echo "expected total: ${t}s of GPU_SUITE_BUDGET=${BUDGET}s (${RESERVE}s kept for the end)"
        echo "a step starts only if the budget left covers its expected time; its timeout is"
        echo "min(cap, budget left); a rerun with OUT_DIR/summary.txt present resumes"
    }
}

case $BUDGET in
'' | *[!0-9]*)
    echo "run.sh: GPU_SUITE_BUDGET must be whole seconds, not '$BUDGET'" >&2
    exit 2
    ;;
esac
[ -n "${GPU_STEPS:-}" ] && check_steps
if [ "${1:-}" = "--plan" ]; then
    print_plan
    exit 0
fi
if [ $# -gt 2 ] || [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
    usage
    [ $# -gt 2 ] && exit 2
    exit 0
fi

gpu_present() {
    [ -e /dev/nvidia0 ] || return 1
    command -v nvidia-smi >/dev/null 2>&1 || return 1
    timeout 60 nvidia-smi -L >/dev/null 2>&1
}

if [ $SIM = 0 ] && ! gpu_present; then
    echo "SKIP: no NVIDIA GPU present"
    exit 77
fi

BUILD_ARG=${1:-${GPUFRAC_BUILD:-}}
if [ -z "$BUILD_ARG" ]; then
    BUILD_ARG=build
    [ ! -e build/bin/gpufrac ] && [ -e build-rel/bin/gpufrac ] && BUILD_ARG=build-rel
fi
if ! BUILD=$(cd "$BUILD_ARG" 2>/dev/null && pwd); then
    echo "run.sh: build directory '$BUILD_ARG' does not exist (build first, or pass BUILD_DIR)" >&2
    exit 2
fi
OUT_DIR=${2:-${OUT:-./gpu-out}}
mkdir -p "$OUT_DIR" || exit 2
OUT_DIR=$(cd "$OUT_DIR" && pwd)
GPUFRAC="$BUILD/bin/gpufrac"
BENCH="$BUILD/bin/gpufrac-bench"
SUMMARY="$OUT_DIR/summary.txt"
START=$(date +%s)
DEADLINE=$((START + BUDGET))
# fractions made by this run live here, not in /run/gpufrac, nor in OUT_DIR
# (ledgers are large files nobody needs back)
if ! GPUFRAC_STATE_DIR=$(mktemp -d /tmp/gfstate.XXXXXX); then
    echo "run.sh: mktemp -d /tmp/gfstate.XXXXXX failed" >&2
    exit 2
fi
export GPUFRAC_STATE_DIR
trap 'rm -rf "$GPUFRAC_STATE_DIR"' EXIT
export PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH="$HERE${PYTHONPATH:+:$PYTHONPATH}"

RACE_S=${GPU_RACE_SECONDS:-15}
TRAIN_STEPS=${GPU_TRAIN_STEPS:-100}
CALL_ROUNDS=3 CALL_PAIRS=20000
BENCH_ARGS=(--runs 3 --startup-runs 20)
if [ $SIM = 1 ]; then
    # the dry run: gpusim under every process, small counts
    export GPU_SUITE_SIM=1
    export LD_LIBRARY_PATH="$BUILD/lib/gpusim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export GPUSIM_DEVICES=${GPU_SIM_DEVICES:-16Gi}
    export GPUSIM_STATE="$OUT_DIR/gpusim.state"
    export PATH="$HERE/sim:$PATH"
    export GPU_AGENT_MPS_CONTROL="$HERE/../fakes/nvidia-cuda-mps-control"
    RACE_S=${GPU_RACE_SECONDS:-2}
    TRAIN_STEPS=${GPU_TRAIN_STEPS:-5}
    CALL_ROUNDS=2 CALL_PAIRS=2000
    BENCH_ARGS=(--sim --quick)
fi

# --- the summary ------------------------------------------------------------
declare -A LINE=()  # step -> its summary line
declare -A RECORDED=()  # step -> 1 when an earlier run recorded it (budget skips aside)
HEADER=""

load_summary() {
    local status name detail
    [ -f "$SUMMARY" ] && [ "${GPU_SUITE_FRESH:-0}" != 1 ] || return 0
    HEADER=$(grep '^# run ' "$SUMMARY")
    while IFS= read -r l; do
        read -r status name detail <<<"$l"
        case $status in PASS | FAIL | SKIP) ;; *) continue ;; esac
        [ -n "$(plan_field "$name" 2)" ] || continue
        LINE[$name]=$l
        [ "$status" = SKIP ] && [ "${detail#budget:}" != "$detail" ] && continue
        RECORDED[$name]=1
    done <"$SUMMARY"
}

count() { # STATUS: lines of the summary with that status
    local n=0 name
    for name in $(plan_names); do
        case ${LINE[$name]:-} in "$1 "*) n=$((n + 1)) ;; esac
    done
    echo $n
}

write_summary() {
    local tmp="$SUMMARY.tmp" name
    {
        [ -n "$HEADER" ] && echo "$HEADER"
        echo "# run $RUN_ID"
        for name in $(plan_names); do
            [ -n "${LINE[$name]:-}" ] && echo "${LINE[$name]}"
        done
        echo "# failed=$(count FAIL) passed=$(count PASS) skipped=$(count SKIP)" \
            "elapsed_s=$(($(date +%s) - START)) budget_s=$BUDGET"
    } >"$tmp" && mv -f "$tmp" "$SUMMARY"
}

# record NAME STATUS DETAIL: the step's summary line, written at once.
record() {
    LINE[$1]=$(printf '%-5s %-16s %s' "$2" "$1" "$3")
    echo "${LINE[$1]}"
    write_summary
}

# detail_of NAME: the status and detail of a step's line ("not run" if none).
detail_of() {
    local status name detail
    [ -n "${LINE[$1]:-}" ] || { echo "not run"; return; }
    read -r status name detail <<<"${LINE[$1]}"
    echo "$status $detail"
}

# figures LOG: the key=value lines of a log, on one line.
figures() {
    grep -E '^[A-Za-z0-9_.]+=' "$1" 2>/dev/null | grep -Ev '^(result|exit)=' | tr '\n' ' ' |
        cut -c1-1500
}

# value KEY LOG: a key=value figure from a log (the last).
value() {
    grep -oE "(^| )$1=[^ ]*" "$2" 2>/dev/null | tail -n1 | cut -d= -f2
}

# ratio A B: A / B with three decimals ("" when either is missing).
ratio() {
    [ -n "$1" ] && [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b }'
}

# --- running steps ----------------------------------------------------------
STEP_T0=0 STEP_END=0 STEP_CAPPED=0

# left: seconds this step may still use.
left() {
    local now
    now=$(date +%s)
    echo $((STEP_END - now))
}

# limited CMD...: CMD under the step's remaining time (its process group is
# signalled: TERM, KILL 5 s later).
limited() {
    local t
    t=$(left)
    [ "$t" -lt 1 ] && t=1
    timeout --kill-after=5 "$t" "$@"
}

# judge NAME LOG RC: one summary line from a command's exit status and log.
judge() {
    local name=$1 log=$2 rc=$3 why
    echo "exit=$rc" >>"$log"
    case $rc in
    0) record "$name" PASS "$(figures "$log")" ;;
    77)
        why=$(grep -E '^SKIP' "$log" | tail -n1 | sed 's/^SKIP:\{0,1\} *//')
        record "$name" SKIP "${why:-skipped (log: $log)}"
        ;;
    124 | 137)
        if [ "$STEP_CAPPED" = 1 ]; then
            record "$name" SKIP "budget: stopped after $(($(date +%s) - STEP_T0))s, GPU_SUITE_BUDGET spent (log: $log) $(figures "$log")"
        else
            record "$name" FAIL "timed out after its cap of $(plan_field "$name" 4)s (log: $log) $(figures "$log")"
        fi
        ;;
    *) record "$name" FAIL "exit $rc (log: $log) $(figures "$log")" ;;
    esac
}

# cmd_step NAME CMD...: CMD with its output in OUT_DIR/NAME.log, judged.
cmd_step() {
    local name=$1 log="$OUT_DIR/$1.log" rc
    shift
    printf '$ %s\n' "$*" >"$log"
    limited "$@" >>"$log" 2>&1
    rc=$?
    judge "$name" "$log" $rc
}

# frac NAME MEMORY CMD...: CMD inside a fresh fraction of MEMORY on the test GPU.
frac() {
    local name=$1 mem=$2
    shift 2
    cmd_step "$name" "$GPUFRAC" run --memory "$mem" --devices "$DEV" -- "$@"
}

# run_step NAME: the step's function under its budget, unless resumed.
run_step() {
    local name=$1 exp cap now budget_left fn
    selected "$name" || return 0
    if [ -z "${GPU_STEPS:-}" ] && [ -n "${RECORDED[$name]:-}" ]; then
        echo "== $name: recorded by an earlier run, not run again" >&2
        return 0
    fi
    exp=$(plan_field "$name" 3)
    cap=$(plan_field "$name" 4)
    now=$(date +%s)
    budget_left=$((DEADLINE - RESERVE - now))
    if [ "$budget_left" -lt "$exp" ]; then
        record "$name" SKIP "budget: ${budget_left}s left of GPU_SUITE_BUDGET=${BUDGET}s, the step expects ${exp}s (a rerun resumes here)"
        return 0
    fi
    STEP_T0=$now STEP_CAPPED=0
    if [ "$budget_left" -lt "$cap" ]; then
        STEP_END=$((now + budget_left))
        STEP_CAPPED=1
    else
        STEP_END=$((now + cap))
    fi
    echo "== $name (up to $((STEP_END - now))s)" >&2
    fn="step_${name//./_}"
    "$fn"
}

have() { # MODULE: importable per the env step (found, not imported)
    grep -q "^module_$1=found" "$OUT_DIR/environment.log" 2>/dev/null
}

# --- the steps --------------------------------------------------------------
step_build() {
    local f missing=""
    for f in "$GPUFRAC" "$BUILD/bin/gpufracd" "$BENCH" "$BUILD/lib/libgpufrac.so"; do
        [ -e "$f" ] || missing="$missing $f"
    done
    if [ -n "$missing" ]; then
        record build FAIL "missing$missing"
        return 1
    fi
    record build PASS "build=$BUILD git=$(git -C "$HERE" rev-parse --short HEAD 2>/dev/null || echo unknown)"
}

# the sandbox, from what the kernel reports: gVisor says 4.4.0
sandbox() {
    local k
    k=$(uname -r)
    case $k in
    4.4.0) echo gvisor ;;
    *) if grep -qi firecracker /proc/cmdline /sys/class/dmi/id/* 2>/dev/null ||
        dmesg 2>/dev/null | grep -qi firecracker; then echo firecracker; else echo "unknown($k)"; fi ;;
    esac
}

step_env() {
    local log="$OUT_DIR/environment.log" q
    {
        echo "date=$(date -u +%FT%TZ)"
        echo "kernel=$(uname -r)"
        echo "sandbox=$(sandbox)"
        echo "uid=$(id -u)"
        echo "sim=$SIM"
        limited nvidia-smi -L | sed 's/^/gpu: /'
        q=$(limited nvidia-smi --query-gpu=name,memory.total,driver_version \
            --format=csv,noheader,nounits -i "$DEV" | head -n1)
        echo "gpu_name=$(echo "$q" | cut -d, -f1 | sed 's/^ *//; s/ /_/g')"
        echo "device_mib=$(echo "$q" | cut -d, -f2 | tr -dc '0-9')"
        echo "driver=$(echo "$q" | cut -d, -f3 | tr -d ' ')"
        echo "python=$("$PY" -c 'import platform; print(platform.python_version())')"
        # versions and importability without importing (an import of torch costs seconds)
        limited "$PY" - <<'PYEOF'
import importlib.metadata as md, importlib.util as iu
for mod, dist in (("torch", "torch"), ("cupy", "cupy-cuda12x cupy-cuda13x cupy"),
                  ("jax", "jax"), ("numba", "numba-cuda numba"), ("pynvml", "nvidia-ml-py")):
    found = iu.find_spec(mod) is not None
    ver = "?"
    for d in dist.split():
        try:
            ver = md.version(d)
            break
        except md.PackageNotFoundError:
            pass
    print("module_%s=%s version_%s=%s" % (mod, "found" if found else "missing", mod, ver))
PYEOF
    } >"$log" 2>&1
    DEVICE_MIB=$(value device_mib "$log")
    export DEVICE_MIB
    local detail
    detail="date=$(value date "$log") gpu=$(value gpu_name "$log") device_mib=$DEVICE_MIB driver=$(value driver "$log") kernel=$(value kernel "$log") sandbox=$(value sandbox "$log") uid=$(id -u) sim=$SIM"
    detail="$detail $(grep -oE 'version_[a-z]+=[^ ]*' "$log" | tr '\n' ' ')"
    RUN_ID="$(value date "$log") gpu=$(value gpu_name "$log") driver=$(value driver "$log") kernel=$(value kernel "$log") sandbox=$(value sandbox "$log") budget_s=$BUDGET steps=${GPU_STEPS:-all}"
    if [ -z "$DEVICE_MIB" ]; then
        record env FAIL "nvidia-smi gave no memory.total (log: $log) $detail"
    else
        record env PASS "$detail"
    fi
}

step_torch_limits() { frac torch.limits "$LIMIT" "$PY" "$HERE/torch_probe.py" limits; }
step_torch_share() { frac torch.share "$LIMIT" "$PY" "$HERE/torch_probe.py" share; }
step_torch_footprint() { frac torch.footprint "$LIMIT" "$PY" "$HERE/torch_probe.py" footprint; }

step_torch_portion() {
    if [ -z "${DEVICE_MIB:-}" ]; then
        record torch.portion FAIL "the device's memory.total is unknown (see step env)"
        return
    fi
    frac torch.portion 0.5 "$PY" "$HERE/torch_probe.py" portion "$DEVICE_MIB"
}

step_footprint_ctx() { frac footprint.ctx 2Gi "$PY" "$HERE/footprint_probe.py" ctx; }

step_footprint_race() {
    if [ "$SIM" = 1 ]; then
        # a simulated device of its own, so gpusim's exact peak is this race's
        GPUSIM_STATE="$OUT_DIR/gpusim.race.state" GPUSIM_TOOL="$BUILD/tests/gpusimtool" \
            frac footprint.race 4Gi "$PY" "$HERE/footprint_probe.py" race 8 4 64 "$RACE_S"
        return
    fi
    frac footprint.race 4Gi "$PY" "$HERE/footprint_probe.py" race 8 4 64 "$RACE_S"
}

# The limit check as user nobody: torch where importable, else the ctypes
# driver probe. Its state directory and output are nobody's own.
step_nonroot() {
    local dir probe py mem
    if [ "$(id -u)" != 0 ]; then
        record nonroot SKIP "running as uid $(id -u) already: this whole run is the non-root run"
        return
    fi
    if ! command -v runuser >/dev/null 2>&1; then
        record nonroot SKIP "runuser not found (util-linux): cannot become nobody"
        return
    fi
    py=$(command -v "$PY") || py=$PY
    if ! runuser -u nobody -- test -r "$HERE/gpuprobe.py" -a -x "$GPUFRAC"; then
        record nonroot SKIP "user nobody cannot read $HERE or run $GPUFRAC (a parent directory is private)"
        return
    fi
    # this run's interpreter, else the one nobody's PATH names
    if ! runuser -u nobody -- "$py" -c pass 2>/dev/null; then
        if ! runuser -u nobody -- "$PY" -c pass 2>/dev/null; then
            record nonroot SKIP "user nobody cannot run $py, nor $PY on its PATH (a parent directory is private)"
            return
        fi
        py=$PY
    fi
    if ! dir=$(mktemp -d /tmp/gfnr.XXXXXX) || ! chmod 0777 "$dir"; then
        record nonroot FAIL "mktemp -d /tmp/gfnr.XXXXXX failed"
        return
    fi
    if have torch && [ $SIM = 0 ]; then
        mem=$LIMIT probe=("$py" "$HERE/torch_probe.py" limits)
    else # within the limit, then past it: ok, then refused
        mem=2Gi probe=("$py" "$HERE/cuprobe.py" expect-limit 2Gi alloc 1Gi alloc 2Gi info)
    fi
    cmd_step nonroot runuser -u nobody -- env HOME="$dir" GPUFRAC_STATE_DIR="$dir/state" \
        GPUSIM_STATE="$dir/gpusim.state" "$GPUFRAC" run --memory "$mem" --devices "$DEV" -- \
        "${probe[@]}"
    rm -rf "$dir"
    if [ "${probe[1]}" = "$HERE/cuprobe.py" ] && [ "${LINE[nonroot]:0:4}" = PASS ] &&
        [ "$(grep '^alloc=' "$OUT_DIR/nonroot.log" | tr '\n' ' ')" != \
            "alloc=ok alloc=CUDA_ERROR_OUT_OF_MEMORY " ]; then
        record nonroot FAIL "as nobody, 1 GiB then 1+2 GiB in a 2 GiB limit: not ok then refused (log: $OUT_DIR/nonroot.log)"
    fi
}

step_nvml() { frac nvml "$LIMIT" "$PY" "$HERE/nvml_probe.py"; }
step_cupy() { frac cupy "$LIMIT" "$PY" "$HERE/cupy_probe.py"; }

step_jax_noprealloc() {
    frac jax.noprealloc "$LIMIT" env XLA_PYTHON_CLIENT_PREALLOCATE=false "$PY" "$HERE/jax_probe.py"
}

step_jax_prealloc() {
    frac jax.prealloc "$LIMIT" env XLA_PYTHON_CLIENT_PREALLOCATE=true "$PY" "$HERE/jax_probe.py"
}

step_numba() { frac numba "$LIMIT" "$PY" "$HERE/numba_probe.py"; }

step_status() {
    # a fraction's status must be readable as JSON while nothing runs in it
    # shellcheck disable=SC2016 # expanded by the inner sh
    cmd_step status sh -c '"$1" status --json | "$2" -c "import json,sys; assert json.load(sys.stdin)[\"version\"] == 1; print(\"json=ok\")"' \
        sh "$GPUFRAC" "$PY"
}

step_agent_reclaim() { cmd_step agent.reclaim "$HERE/agent_check.sh" "$BUILD" "$OUT_DIR/agent" reclaim; }
step_agent_watchdog() { cmd_step agent.watchdog "$HERE/agent_check.sh" "$BUILD" "$OUT_DIR/agent" watchdog; }

step_overhead_bench() {
    local log="$OUT_DIR/overhead.bench.log" rc keys extra
    read -r -a extra <<<"${GPU_BENCH_ARGS:-}"
    printf '$ %s\n' "$BENCH ${BENCH_ARGS[*]} ${extra[*]}" >"$log"
    limited "$BENCH" "${BENCH_ARGS[@]}" ${extra[@]+"${extra[@]}"} --json "$OUT_DIR/bench.json" \
        >>"$log" 2>&1
    rc=$?
    keys=$(grep -E '^(platform|device_name|pairs_ns_(no)?shim|pairs_added_ns|pairs_ratio|contended_ratio|contended_cpu_added_ns|big_(un)?contended_median_us_(no)?shim|big_contended_p99_us_(no)?shim|launch_ns_(no)?shim|launch_ratio|launch_status|startup_median_ms_(no)?shim|startup_added_ms)=' \
        "$log" | tr ' ' '_' | tr '\n' ' ')
    case $rc in
    0) record overhead.bench PASS "$keys(table: $log)" ;;
    *) judge overhead.bench "$log" "$rc" ;;
    esac
}

step_overhead_calls() {
    frac overhead.calls 2Gi "$PY" "$HERE/overhead_probe.py" "$CALL_ROUNDS" "$CALL_PAIRS"
}

# A training step under gpufrac against none, two rounds interleaved (bare,
# gpufrac, gpufrac, bare): the best step time of each side. A figure, not an
# assertion: the target (ratio <= 1.01) is recorded as met or missed.
step_overhead_train() {
    local log="$OUT_DIR/overhead.train.log" i side rc bare="" fracd="" t r
    : >"$log"
    for i in 1 2; do
        for side in bare gpufrac; do
            [ $i = 2 ] && { [ $side = bare ] && side=gpufrac || side=bare; }
            echo "--- round $i $side" >>"$log"
            if [ $side = bare ]; then
                limited "$PY" "$HERE/torch_train.py" "$TRAIN_STEPS" >"$log.part" 2>&1
            else
                limited "$GPUFRAC" run --name train --memory "$LIMIT" --devices "$DEV" -- \
                    "$PY" "$HERE/torch_train.py" "$TRAIN_STEPS" >"$log.part" 2>&1
            fi
            rc=$?
            cat "$log.part" >>"$log"
            if [ $rc -ne 0 ]; then
                rm -f "$log.part"
                judge overhead.train "$log" $rc
                return
            fi
            t=$(value step_ms "$log.part")
            if [ $side = bare ]; then
                bare=$(awk -v a="$bare" -v b="$t" 'BEGIN { print (a == "" || b < a) ? b : a }')
            else
                fracd=$(awk -v a="$fracd" -v b="$t" 'BEGIN { print (a == "" || b < a) ? b : a }')
            fi
        done
    done
    rm -f "$log.part"
    r=$(ratio "$fracd" "$bare")
    record overhead.train PASS "step_ms_bare=$bare step_ms_gpufrac=$fracd ratio=$r target=$(awk -v r="$r" 'BEGIN { print (r <= 1.01) ? "met" : "missed" }') footprint_charged_mib=$(value footprint_charged_mib "$log") footprint_nvml_mib=$(value footprint_nvml_mib "$log")"
}

step_mps() {
    local log="$OUT_DIR/mps.log" rc
    limited "$HERE/mps_check.sh" "$OUT_DIR/mps" >"$log" 2>&1
    rc=$?
    echo "exit=$rc" >>"$log"
    case $rc in
    0) record mps PASS "$(grep -E '^(PASS|FAIL)' "$OUT_DIR/mps/summary.txt" 2>/dev/null | awk '{ printf "%s=%s ", $2, $1 }')$(figures "$log")" ;;
    1) record mps FAIL "$(grep -E '^(PASS|FAIL)|^FAIL' "$OUT_DIR/mps/summary.txt" "$log" 2>/dev/null | tr '\n' ' ' | cut -c1-600)(log: $log)" ;;
    *) judge mps "$log" $rc ;;
    esac
}

step_sm_agent() { cmd_step sm.agent "$HERE/agent_check.sh" "$BUILD" "$OUT_DIR/agent" sm; }

# sm-sharing: one 0.5 fraction alone, then two at once; throughput kept per
# process, a figure. Skipped where MPS did not start in this sandbox.
step_sm_train() {
    local a_log="$OUT_DIR/sm.train.a.log" b_log="$OUT_DIR/sm.train.b.log" log="$OUT_DIR/sm.train.log"
    local pa pb ra rb alone sa sb
    case ${LINE[mps]:-} in
    PASS*) ;;
    *)
        record sm.train SKIP "MPS did not run here (step mps: $(detail_of mps | cut -c1-200))"
        return
        ;;
    esac
    printf '$ sm-sharing 0.5 alone, then 2 x 0.5\n' >"$log"
    limited "$GPUFRAC" run --name sm-alone --mode sm-sharing --compute 0.5 --memory "$LIMIT" \
        --devices "$DEV" -- "$PY" "$HERE/torch_train.py" "$TRAIN_STEPS" >>"$log" 2>&1 || {
        judge sm.train "$log" $?
        return
    }
    limited "$GPUFRAC" run --name sm-a --mode sm-sharing --compute 0.5 --memory "$LIMIT" \
        --devices "$DEV" -- "$PY" "$HERE/torch_train.py" "$TRAIN_STEPS" >"$a_log" 2>&1 &
    pa=$!
    limited "$GPUFRAC" run --name sm-b --mode sm-sharing --compute 0.5 --memory "$LIMIT" \
        --devices "$DEV" -- "$PY" "$HERE/torch_train.py" "$TRAIN_STEPS" >"$b_log" 2>&1 &
    pb=$!
    wait "$pa"
    ra=$?
    wait "$pb"
    rb=$?
    alone=$(value steps_per_s "$log")
    sa=$(value steps_per_s "$a_log")
    sb=$(value steps_per_s "$b_log")
    if [ $ra -ne 0 ] || [ $rb -ne 0 ] || [ -z "$sa" ] || [ -z "$sb" ] || [ -z "$alone" ]; then
        cat "$a_log" "$b_log" >>"$log"
        [ "$ra" -eq 0 ] && ra=$rb
        [ "$ra" -eq 0 ] && ra=1
        judge sm.train "$log" "$ra"
    else
        record sm.train PASS "steps_per_s_alone=$alone steps_per_s_a=$sa steps_per_s_b=$sb kept_a=$(ratio "$sa" "$alone") kept_b=$(ratio "$sb" "$alone")"
    fi
}

main() {
    local name
    RUN_ID="$(date -u +%FT%TZ) budget_s=$BUDGET steps=${GPU_STEPS:-all}"
    load_summary
    echo "gpufrac GPU suite: build $BUILD, output $OUT_DIR, budget ${BUDGET}s$([ $SIM = 1 ] && echo ', dry run on gpusim')" >&2
    # the build and the machine are looked at on every run
    RECORDED[build]="" RECORDED[env]=""
    for name in $(plan_names); do
        case $name in
        build | env)
            STEP_END=$(($(date +%s) + $(plan_field "$name" 4)))
            STEP_CAPPED=0 STEP_T0=$(date +%s)
            "step_$name" || { [ "$name" = build ] && break; }
            ;;
        *) run_step "$name" ;;
        esac
    done
    write_summary
    tail -n1 "$SUMMARY"
    [ "$(count FAIL)" -eq 0 ]
}

main
