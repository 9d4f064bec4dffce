#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# MPS (legacy, driver 580) checks on a real NVIDIA GPU, the way gpufracd's
# agent/mps.c drives it: one control daemon per GPU, pipe dir under a short
# path, commands on stdin of nvidia-cuda-mps-control.
#
#   tests/gpu/mps_check.sh [OUT_DIR]     (default: $OUT or ./gpu-out/mps)
#
# Checks (with the H200 figures measured on such a machine):
#   sm_share     client with CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25 sees 32 of 132 SMs
#                (other GPUs: fewer SMs than without MPS, at most ceil(25 %))
#   pinned_limit client with CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=8G: free <= 8.5 GB,
#                6 GiB allocates, +4 GiB fails
#   terminate    terminate_client <srv> <pid> ends a busy client; server stays
#                ACTIVE and a new client still runs
# Needs python3 with torch (or cupy for sm_share only). Prints key=value
# figures and one PASS/FAIL/SKIP line per check. Exit 0 all passed, 1 a
# failure, 77 no GPU / no MPS tools / no torch.
set -u
OUT_DIR=${1:-${OUT:-./gpu-out}/mps}
PY=${PYTHON:-python3}
DEV=${GPU_TEST_DEVICE:-0}

gpu_present() {
    [ -e /dev/nvidia0 ] && command -v nvidia-smi >/dev/null 2>&1 &&
        timeout 60 nvidia-smi -L >/dev/null 2>&1
}
if [ "${GPU_SUITE_FORCE:-0}" != 1 ] && ! gpu_present; then
    echo "SKIP: no NVIDIA GPU present"
    exit 77
fi
CTL=$(command -v nvidia-cuda-mps-control || ls /usr/local/nvidia/bin/nvidia-cuda-mps-control 2>/dev/null)
if [ -z "$CTL" ]; then
    echo "SKIP: nvidia-cuda-mps-control not found"
    exit 77
fi
if ! "$PY" -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    echo "SKIP: python torch with CUDA not available"
    exit 77
fi
mkdir -p "$OUT_DIR" || exit 1
UUID=$(nvidia-smi -i "$DEV" --query-gpu=uuid --format=csv,noheader | tr -d ' ')
SHORT=$(echo "${UUID#GPU-}" | cut -c1-8)
BASE=$(mktemp -d /tmp/gfm.XXXXXX)
PIPE=$BASE/mps/$SHORT
mkdir -p "$PIPE/log"
chmod 0755 "$BASE" "$BASE/mps" "$PIPE" "$PIPE/log"
FAILED=0
CLIENT=""

ctl() { echo "$1" | CUDA_MPS_PIPE_DIRECTORY=$PIPE timeout 10 "$CTL"; }
record() { printf '%-5s %-13s %s\n' "$2" "$1" "$3" | tee -a "$OUT_DIR/summary.txt"; [ "$2" = FAIL ] && FAILED=$((FAILED + 1)); return 0; }
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
    [ -n "$CLIENT" ] && kill -9 "$CLIENT" 2>/dev/null
    ctl quit >/dev/null 2>&1
    sleep 1
    cp -r "$PIPE/log" "$OUT_DIR/mps-log" 2>/dev/null
    rm -rf "$BASE"
}
trap cleanup EXIT
: >"$OUT_DIR/summary.txt"

# client [ENV=VAL...] -- python code: runs a CUDA client of this daemon
client() {
    env CUDA_VISIBLE_DEVICES="$UUID" CUDA_MPS_PIPE_DIRECTORY="$PIPE" "$@"
}

echo "gpu=$UUID pipe_dir=$PIPE pipe_dir_len=${#PIPE} control=$CTL"
CUDA_VISIBLE_DEVICES=$UUID CUDA_MPS_PIPE_DIRECTORY=$PIPE CUDA_MPS_LOG_DIRECTORY=$PIPE/log "$CTL" -d ||
    { echo "FAIL: $CTL -d"; exit 1; }
for _ in $(seq 500); do [ -S "$PIPE/control" ] && break; sleep 0.01; done
[ -S "$PIPE/control" ] || { echo "FAIL: no control socket in $PIPE after 5 s"; exit 1; }

# --- sm_share ---------------------------------------------------------------
FULL=$(env CUDA_VISIBLE_DEVICES="$UUID" "$PY" -c 'import torch; print(torch.cuda.get_device_properties(0).multi_processor_count)')
SMS=$(client CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25 "$PY" -c 'import torch; torch.zeros(1, device="cuda"); print(torch.cuda.get_device_properties(0).multi_processor_count)' 2>"$OUT_DIR/sm_share.err")
echo "sm_full=$FULL sm_at_25pct=$SMS"
if [ "$FULL" = 132 ]; then WANT=32; else WANT=""; fi
if [ -n "$WANT" ] && [ "$SMS" = "$WANT" ]; then record sm_share PASS "$SMS of $FULL SMs"
elif [ -z "$WANT" ] && [ -n "$SMS" ] && [ "$SMS" -lt "$FULL" ] && [ $((SMS * 4)) -le $((FULL + 3)) ]; then record sm_share PASS "$SMS of $FULL SMs"
else record sm_share FAIL "saw '$SMS' of $FULL SMs at 25 % (want ${WANT:-<= 25 %})"; fi

# --- pinned_limit -------------------------------------------------------------
client CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=8G "$PY" - >"$OUT_DIR/pinned.log" 2>&1 <<'PYEOF'
import torch
free, total = torch.cuda.mem_get_info()
print(f"free={free} total={total}")
a = torch.empty(6 << 30, dtype=torch.uint8, device="cuda")
print("alloc_6g=ok")
try:
    b = torch.empty(4 << 30, dtype=torch.uint8, device="cuda")
    print("alloc_plus_4g=ok")
except torch.OutOfMemoryError:
    print("alloc_plus_4g=oom")
PYEOF
grep '=' "$OUT_DIR/pinned.log"
FREE=$(sed -n 's/^free=\([0-9]*\).*/\1/p' "$OUT_DIR/pinned.log")
if [ -n "$FREE" ] && [ "$FREE" -le 8500000000 ] && grep -q '^alloc_6g=ok' "$OUT_DIR/pinned.log" &&
    grep -q '^alloc_plus_4g=oom' "$OUT_DIR/pinned.log"; then
    record pinned_limit PASS "free=$FREE, 6 GiB ok, +4 GiB OOM"
else record pinned_limit FAIL "see $OUT_DIR/pinned.log"; fi

# --- terminate ----------------------------------------------------------------
client "$PY" -u - >"$OUT_DIR/terminate.log" 2>&1 <<'PYEOF' &
import torch, time
x = torch.randn(4096, 4096, device="cuda")
print("ready", flush=True)
while True:
    x = (x @ x).tanh()
    torch.cuda.synchronize()
PYEOF
CLIENT=$!
for _ in $(seq 300); do grep -q ready "$OUT_DIR/terminate.log" && break; sleep 0.1; done
SRV=$(ctl get_server_list | head -1)
CLIENTS=$(ctl "get_client_list $SRV" | tr '\n' ' ')
echo "server=$SRV clients=$CLIENTS client_pid=$CLIENT"
T0=$(date +%s.%N)
ANSWER=$(ctl "terminate_client $SRV $CLIENT")
GONE=no
for _ in $(seq 300); do kill -0 "$CLIENT" 2>/dev/null || { GONE=yes; break; }; sleep 0.1; done
T1=$(date +%s.%N)
wait "$CLIENT" 2>/dev/null; RC=$?
CLIENT_WAS=$CLIENT; CLIENT=""
STATUS=$(ctl "get_server_status $SRV")
AFTER=$(client "$PY" -c 'import torch; print((torch.ones(8, device="cuda") * 2).sum().item())' 2>&1 | tail -1)
echo "terminate_answer='$ANSWER' client_gone=$GONE client_rc=$RC seconds=$(awk "BEGIN{printf \"%.2f\", $T1 - $T0}") server_status=$STATUS new_client=$AFTER"
case " $CLIENTS " in *" $CLIENT_WAS "*) LISTED=yes ;; *) LISTED=no ;; esac
if [ "$LISTED" = yes ] && [ "$GONE" = yes ] && [ "$STATUS" = ACTIVE ] && [ "$AFTER" = 16.0 ]; then
    record terminate PASS "client ended (rc $RC), server ACTIVE, new client ok"
else record terminate FAIL "listed=$LISTED gone=$GONE status=$STATUS new_client=$AFTER"; fi

[ "$FAILED" -eq 0 ] || exit 1
exit 0
