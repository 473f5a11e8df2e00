#!/usr/bin/env bash
# The GPU checks of docs/runtime.md ("On a GPU"), as one script for a one-GPU machine with 16 cores.
#
#   benchmarks/gpu/gpu_checks.sh OUT [--quick] [--deadline-s S] [PHASE ...]
#
# PHASES (default: all, in this order): env tests profile clock validate suite
#   env       nvidia-smi, torch/CUDA versions, cores
#   tests     every CUDA/NCCL/GPU test of the suite (pytest -k "cuda or nccl or gpu"): lbsim train on
#             1 NCCL rank and on 2 ranks sharing the GPU over gloo, the DDP example on 1 NCCL rank and
#             3 gloo ranks sharing the GPU (gpu_model LB-BSP), the CUDA step clock, the weighted hook
#   profile   lbsim profile-model: torchvision ResNet-50 (fp32 and bf16 autocast), the example's
#             digits CNN; lbsim profile of the runtime's digits MLP on one NCCL rank
#   clock     benchmarks/bench_cuda_clock.py: the CUDA-event step clock's cost per step
#   validate  lbsim validate of every scheme (--repeats 3), four scenarios side by side, each pinned
#             to its own 4 cores (ranks never outnumber cores), started first, in the background
#   suite     the whole test suite with the GPU visible (pytest -n 8), if time is left
# --quick: tiny sizes, for a dry run of the script on a CPU machine. Results: OUT/steps.txt (one
# line per step: name, exit code, seconds), OUT/logs/*.log, OUT/results.tgz (profiles, validations).
set -u
OUT=${1:?usage: gpu_checks.sh OUT [--quick] [--deadline-s S] [PHASE ...]}
shift
QUICK=0
DEADLINE_S=540
PHASES=()
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --deadline-s) DEADLINE_S=$2; shift ;;
    *) PHASES+=("$1") ;;
  esac
  shift
done
[ ${#PHASES[@]} -eq 0 ] && PHASES=(env tests profile clock validate suite)
has() { local p; for p in "${PHASES[@]}"; do [ "$p" = "$1" ] && return 0; done; return 1; }

T0=$(date +%s)
left() { echo $(( DEADLINE_S - ($(date +%s) - T0) )); }
mkdir -p "$OUT/logs" "$OUT/work"
cd "$(dirname "$0")/../.."
# simpy and polars, where the machine lacks them, travel as wheels in .whl/ (docs/runtime.md); installed
# into the interpreter itself, so the tests' subprocesses (which set PYTHONPATH to the repository) find them
if [ -d .whl ] && ! python3 -c "import simpy, polars" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir .whl/*.whl
fi
export PYTHONPATH=$PWD
CORES=$(python3 -c "import os; print(len(os.sched_getaffinity(0)))")  # before OMP_NUM_THREADS (nproc honours it)
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
FG="taskset -c 0-3"  # the foreground steps' cores; the validations get 4-7, 8-11, 12-15
[ "$CORES" -lt 16 ] && FG=""

step() {  # step NAME LIMIT_S CMD...: run with a time limit, log, one line in steps.txt
  local name=$1 limit=$2 start rc
  shift 2
  local budget; budget=$(left)
  if [ "$budget" -lt 20 ]; then echo "$name skipped (deadline)" | tee -a "$OUT/steps.txt"; return; fi
  [ "$limit" -gt "$budget" ] && limit=$budget
  start=$(date +%s)
  timeout "$limit" "$@" > "$OUT/logs/$name.log" 2>&1
  rc=$?
  echo "$name rc=$rc $(( $(date +%s) - start ))s" | tee -a "$OUT/steps.txt"
}

VPIDS=()
validate_bg() {  # validate_bg NAME CORES SCENARIO SCHEMES [--set ...]
  local name=$1 cores=$2 scen=$3 schemes=$4
  shift 4
  local reps=3 q=()
  [ "$QUICK" = 1 ] && reps=1 && q=(--set workload.updates=8)
  local pin=""; [ "$CORES" -ge 16 ] && pin="taskset -c $cores"
  ( start=$(date +%s)
    timeout $(( $(left) - 15 )) $pin python3 -m lbsim validate "$scen" --schemes "$schemes" --repeats $reps "$@" "${q[@]}" \
      --out "$OUT/work/validate_$name" -q > "$OUT/logs/validate_$name.log" 2>&1
    echo "validate_$name rc=$? $(( $(date +%s) - start ))s" >> "$OUT/steps.txt"
    python3 benchmarks/gpu/validation_table.py "$OUT/work/validate_$name" >> "$OUT/logs/validate_$name.log" 2>&1 ) &
  VPIDS+=($!)
}

if has validate; then
  validate_bg cpu4 4-7 scenarios/validation/cpu4.yaml bsp,static,lbbsp --set numerics.enabled=true
  validate_bg loft 8-11 scenarios/validation/loft_cpu4.yaml bsp,loft --set numerics.enabled=true
  validate_bg ps 12-15 scenarios/validation/ps_cpu3.yaml asp,ssp,dssp,elastic_bsp,wbsp
fi

if has env; then
  echo "cores: $CORES, foreground: ${FG:-unpinned}" > "$OUT/logs/cores.log"
  step env 60 bash -c 'nvidia-smi; python3 -c "import torch, sys; print(sys.version); print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version(), torch.cuda.is_available(), torch.cuda.device_count(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)"; python3 -m pip list 2>/dev/null | grep -i -E "^(torch|torchvision|numpy|simpy|polars|pandas|scipy|pytest|hypothesis) "'
fi

if has tests; then
  step tests 300 $FG python3 -m pytest -q -p no:cacheprovider -k "cuda or nccl or gpu" -rA tests/
fi

if has profile; then
  R50_B="32,64,128,256"; CNN_B="256,1024,4096,16384"; REPS=10
  [ "$QUICK" = 1 ] && R50_B="2,4" && CNN_B="16,64" && REPS=3
  DEV=cuda; python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null || DEV=cpu
  step profile_resnet50_fp32 150 $FG python3 -m lbsim profile-model torchvision:resnet50 --input-shape 3,224,224 --classes 1000 \
    --batches $R50_B --reps $REPS --device $DEV --out "$OUT/work/profile_resnet50_fp32" -q
  step profile_resnet50_bf16 150 $FG python3 -m lbsim profile-model torchvision:resnet50 --input-shape 3,224,224 --classes 1000 \
    --batches $R50_B --reps $REPS --device $DEV --amp bf16 --out "$OUT/work/profile_resnet50_bf16" -q
  step profile_digits_cnn 120 $FG python3 -m lbsim profile-model examples/ddp_digits.py:Net --input-shape 1,8,8 --classes 10 \
    --batches $CNN_B --reps $REPS --device $DEV --out "$OUT/work/profile_digits_cnn" -q
  BACKEND=(--backend nccl); [ "$DEV" = cpu ] && BACKEND=()
  step profile_digits_mlp 150 $FG python3 -m lbsim profile scenarios/validation/cpu4.yaml --set cluster.groups.0.count=1 \
    --set contention=[] "${BACKEND[@]}" --out "$OUT/work/profile_digits_mlp" -q
fi

if has clock; then
  if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
    step clock_cnn 90 $FG python3 benchmarks/bench_cuda_clock.py --model cnn --pairs 6
    step clock_mlp 90 $FG python3 benchmarks/bench_cuda_clock.py --model mlp --pairs 6
  fi
fi

if has validate; then
  # the fourth validation on the foreground's cores, once the foreground is done
  reps=3; q=(); [ "$QUICK" = 1 ] && reps=1 && q=(--set workload.updates=8)
  step validate_wbsp 240 $FG python3 -m lbsim validate scenarios/validation/wbsp_cpu3.yaml --schemes wbsp --set scheme.overlap=true \
    --repeats $reps "${q[@]}" --out "$OUT/work/validate_wbsp" -q
  python3 benchmarks/gpu/validation_table.py "$OUT/work/validate_wbsp" >> "$OUT/logs/validate_wbsp.log" 2>&1
  for p in "${VPIDS[@]}"; do wait "$p"; done
fi

if has suite; then
  if python3 -c "import xdist" 2>/dev/null; then
    step suite $(( $(left) - 25 < 200 ? $(left) - 25 : 200 )) python3 -m pytest -q -p no:cacheprovider -n 8 tests/
  else
    step suite $(( $(left) - 25 < 200 ? $(left) - 25 : 200 )) python3 -m pytest -q -p no:cacheprovider tests/
  fi
fi

( cd "$OUT/work" && tar czf "$OUT/results.tgz" --exclude='iterations.csv' --exclude='observations.csv' --exclude='updates.csv' \
    --exclude='model.pt' --exclude='numerics.csv' --exclude='decisions.csv' . )
tar czf "$OUT/logs.tgz" -C "$OUT" logs steps.txt
echo "total $(( $(date +%s) - T0 ))s" | tee -a "$OUT/steps.txt"
