#!/usr/bin/env bash
# The device pass of the trustworthy-numbers work (no network; wheels carried in .whl/): GPU tests,
# where the CUPTI cost goes, the native backend recorder's cost, and the validation matrix
# (`rlscope validate`, each mode in its own process, interleaved), all results under $OUT.
#   bash benchmarks/trust_pass.sh            (REPS=5 by default, VOPTS="--max-reps 10" to settle; SKIP_TESTS=1 to skip pytest; SPEED=1 the
#                                             machine-speed probe; PROCSTAT=1 /proc/stat each second;
#                                             LIGHT=1 adds benchmarks/light_cost.py; NOISE=1 benchmarks/process_noise.py;
#                                             LIGHTPARTS=1 benchmarks/light_parts.py (light window's parts, in place);
#                                             VAL=sim_memwin: the eager simulator with RLSCOPE_GPU_MEMORY=windows, then the default;
#                                             LOCKSTEP=1 benchmarks/lockstep.py (collector states, twin process, same core;
#                                             LOCKSTEP_ATIMERS=1: the corrected figure per operation against A's timers);
#                                             INTERLEAVE=1 benchmarks/interleave_cost.py (boundaries' in-loop cost);
#                                             PERSIST=1 benchmarks/cupti_persist.py (CUPTI's cost after one attach);
#                                             NULLS="sim_eager sb3_sac" benchmarks/twin_null.py on those rows (the twin's own null);
#                                             VAL=none skips validation; VAL=rest: eager simulator, SB3 PPO
#                                             and SAC, each alone; VAL=sb3_ppo / sac: one of them; VAL=cpu_pair / pair1 /
#                                             pair2 / pairs: two rows side by side, see below; LIM_A / LIM_B / LIM_SB3: seconds
#                                             per row of VAL=all's first two pairs / its last two rows (one at a time) / its SB3 PPO row; PPO_GPU_SCALE: PPO-GPU's size, 2 by default)
set -uo pipefail
OUT=${OUT:-/tmp/rlscope-trust-pass}
REPS=${REPS:-5}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/*.whl >/dev/null 2>&1 || { echo "wheel install failed"; exit 1; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null || exit 1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
nproc | tee -a "$OUT/gpu.txt"
# a calibration kept on the machine between calls (RLSCOPE_CALIBRATION_DIR=/tmp/cal SKIP_CALIBRATE=1 in a later one)
export RLSCOPE_CALIBRATION_DIR="${RLSCOPE_CALIBRATION_DIR:-$OUT/calibration}"
# build both native parts once (timed), so no run below pays for a compile
( time python3 -c "import torch; from rlscope.collectors import cupti_native, torch_native, scope_native, gpu_memory as m; print(cupti_native.build()); print(torch_native.build(torch)); print(m.load_native(torch)); print('scopes:', scope_native.available())" ) 2>&1 | tail -6
# a carried calibration (SKIP_CALIBRATE=1): is it this machine's? (REKEY=1: take one that differs in host or GPU name only)
[ -n "${SKIP_CALIBRATE:-}" ] && python3 benchmarks/calibration_key_check.py ${REKEY:+--rekey}
# calibrated before the GPU tests too: a user's traces carry the residual costs (scopes, the writer), and
# without them tests/test_gpu_windows.py compared a correction that left those in
# with the GPU measurements: the memory recorder's cost per allocator event is one of them
# (CAL_OPTS=--no-gpu: the CPU costs alone, as before the twentieth session)
[ -z "${SKIP_CALIBRATE:-}" ] && ( time timeout "${CAL_LIMIT:-240}" python3 -m rlscope.cli.main calibrate --quick ${CAL_OPTS:-} ) 2>&1 \
    | tee "$OUT/calibrate.log" | grep -E "refused|: [0-9,.]+ ns|real|memory"
if [ -z "${SKIP_TESTS:-}" ]; then
    RLSCOPE_TEST_ARTIFACTS="$OUT" timeout "${TEST_LIMIT:-260}" python3 -m pytest -q -rfE -m gpu ${TESTS:-tests/} -p no:cacheprovider 2>&1 | tee "$OUT/pytest_gpu.log" | tail -6
fi
if [ -n "${PROCSTAT:-}" ]; then  # every core's /proc/stat line each second, for the whole pass (steal per run)
    # started from a subshell, so the plain `wait`s below do not wait for it
    ( ( while :; do echo "t $(date +%s.%N)"; grep '^cpu[0-9]' /proc/stat; sleep 1; done ) > "$OUT/procstat.log" &
      echo $! > /tmp/procstat.pid )
fi
if [ -n "${SPEED:-}" ]; then  # the machine's two speeds: fixed blocks on two cores at once, with steal and run delay
    timeout 120 python3 benchmarks/machine_speed.py --seconds "${SPEED_SECONDS:-40}" --cpu 3 \
        --json "$OUT/speed_a.json" > "$OUT/speed_a.log" 2>&1 &
    SPEED_A=$!
    timeout 120 python3 benchmarks/machine_speed.py --seconds "${SPEED_SECONDS:-40}" --cpu 11 --kinds py,mem \
        --json "$OUT/speed_b.json" > "$OUT/speed_b.log" 2>&1 &
    wait "$SPEED_A" $!
    cat "$OUT/speed_a.log" "$OUT/speed_b.log"
fi
if [ -n "${MEMCOST:-}" ]; then  # the memory recorder per allocator event and per drained event
    timeout 90 python3 benchmarks/memory_cost.py --json "$OUT/memory_cost.json" 2>&1 | tail -14
fi
if [ -z "${SKIP_BENCH:-}" ]; then
    timeout 150 python3 benchmarks/cupti_cost.py --reps 1 --json "$OUT/cupti_cost.json" 2>&1 | tail -14
    [ "${BENCH:-}" = cupti ] || timeout 60 python3 benchmarks/backend_overhead.py --quick \
        --json "$OUT/backend_overhead.json" 2>&1 | tail -12
fi
if [ -n "${MEMINSITU:-}" ]; then  # the memory recorder's cost per event in three loops (is the calibration's loop representative)
    timeout "${MEMINSITU_LIMIT:-150}" python3 benchmarks/memory_insitu.py --rounds "${MEMINSITU_ROUNDS:-3}" \
        --json "$OUT/memory_insitu.json" 2>&1 | tee "$OUT/memory_insitu.log" | tail -16
fi
if [ -n "${LIGHT:-}" ]; then  # what each collector costs switched off (the light windows), one at a time
    timeout "${LIGHT_LIMIT:-300}" python3 benchmarks/light_cost.py --device cuda --reps "${LIGHT_REPS:-3}" \
        --iterations "${LIGHT_ITERS:-1500}" --configs "${LIGHT_CONFIGS:-unprofiled,scopes,nvtx,backend-off,cupti-off,memory,light,full}" \
        --json "$OUT/light_cost.json" 2>&1 | tee "$OUT/light_cost.log"
fi
if [ -n "${LIGHTPARTS:-}" ]; then  # the light window's parts switched on and off in place (one process)
    timeout "${LIGHTPARTS_LIMIT:-300}" python3 benchmarks/light_parts.py --pairs "${LIGHTPARTS_PAIRS:-150}" \
        ${LIGHTPARTS_PARTS:+--parts "$LIGHTPARTS_PARTS"} --json "$OUT/light_parts.json" 2>&1 | tee "$OUT/light_parts.log"
fi
if [ -n "${LOCKSTEP:-}" ]; then  # collector states against a twin process on the same core, in lockstep
    # LOCKSTEP_LOOP: one loop or several ("sb3_ppo sb3_sac"), each with LOCKSTEP_LIMIT seconds
    for loop in ${LOCKSTEP_LOOP:-sim_eager}; do
        iters=${LOCKSTEP_ITERS:-60}
        case $loop in sb3_*) iters=${LOCKSTEP_SB3_ITERS:-1} ;; esac
        echo "== lockstep $loop"
        timeout "${LOCKSTEP_LIMIT:-420}" python3 benchmarks/lockstep.py --rounds "${LOCKSTEP_ROUNDS:-2}" \
            --pairs "${LOCKSTEP_PAIRS:-30}" ${LOCKSTEP_CONFIGS:+--configs "$LOCKSTEP_CONFIGS"} \
            --loop "$loop" --iters "$iters" ${LOCKSTEP_ATIMERS:+--a-timers} \
            --json "$OUT/lockstep_$loop.json" --keep "$OUT" 2>&1 | grep -v "^rlscope: warning" | tee "$OUT/lockstep_$loop.log"
    done
fi
if [ -n "${NOISE:-}" ]; then  # how far apart unprofiled runs are, on any core vs pinned (NOISE_CPUS) vs moved (NOISE_ROTATE="W W/MS ...")
    # NOISE_WORKLOAD: a validation_workloads.py row (ppo_gpu by default; sim_eager runs on the GPU)
    nw=${NOISE_WORKLOAD:-ppo_gpu}
    timeout "${NOISE_LIMIT:-150}" python3 benchmarks/process_noise.py --runs "${NOISE_RUNS:-5}" --cpus "${NOISE_CPUS:-2-5}" \
        $(for r in ${NOISE_ROTATE:-}; do printf -- '--rotate %s ' "$r"; done) --json "$OUT/process_noise.json" -- python3 benchmarks/validation_workloads.py \
        "$nw" $([ "$nw" = sim_eager ] && echo --device cuda) --scale "${NOISE_SCALE:-${SCALE:-0.5}}" 2>&1 | tee "$OUT/process_noise.log" | tail -5
fi
if [ -n "${BUSY:-}" ]; then  # unprofiled eager simulator pinned to 2-5, alone and beside busy cores (BUSY=CPUS)
    timeout "${BUSY_LIMIT:-150}" python3 benchmarks/process_noise.py --runs "${BUSY_RUNS:-4}" --cpus 2-5 --busy "$BUSY" \
        --json "$OUT/busy.json" -- python3 benchmarks/validation_workloads.py sim_eager --device cuda --scale "${SIM_SCALE:-1}" 2>&1 | tail -4
fi
if [ -n "${THREADCPU:-}" ]; then  # the profiled process's other threads' CPU time (eager simulator, pinned to 2-5)
    for r in 1 2; do
        for m in off profile; do
            echo -n "$m: "
            RLSCOPE_MODE=$( [ $m = off ] && echo off ) taskset -c 2-5 python3 benchmarks/validation_workloads.py sim_eager \
                --device cuda --scale "${SIM_SCALE:-1}" --thread-cpu 2>&1 | grep thread-cpu
        done
    done
fi
if [ -n "${REGIMES:-}" ]; then  # does the profiled process run in the slow regime more (fresh processes, pinned 2-5)
    timeout "${REGIMES_LIMIT:-200}" taskset -c 2-5 python3 benchmarks/regimes.py --reps "${REGIMES_REPS:-3}" \
        --steps "${REGIMES_STEPS:-3000}" --json "$OUT/regimes.json" 2>&1 | tee "$OUT/regimes.log" | tail -9
fi
if [ -n "${INPROC:-}" ]; then  # each collector state's cost on a launch-bound loop, in one process
    timeout "${INPROC_LIMIT:-200}" python3 benchmarks/light_inprocess.py --rounds "${INPROC_ROUNDS:-5}" \
        --iters "${INPROC_ITERS:-2000}" --workload "${INPROC_WORKLOAD:-launch}" ${INPROC_CONFIGS:+--configs "$INPROC_CONFIGS"} --json "$OUT/light_inprocess.json" 2>&1 | tail -8
fi
if [ -n "${INTERLEAVE:-}" ]; then  # what active boundaries cost the job's code around them (eager simulator on the GPU)
    timeout "${INTERLEAVE_LIMIT:-300}" taskset -c 2 python3 benchmarks/interleave_cost.py --device cuda \
        --rounds "${INTERLEAVE_ROUNDS:-100}" --json "$OUT/interleave_cost.json" 2>&1 | tee "$OUT/interleave_cost.log" | tail -16
fi
if [ -n "${PERSIST:-}" ]; then  # does CUPTI, attached once and detached, leave a cost in later launches
    timeout "${PERSIST_LIMIT:-240}" python3 benchmarks/cupti_persist.py --procs "${PERSIST_PROCS:-3}" --cpus 2-5 \
        --json "$OUT/cupti_persist.json" 2>&1 | tee "$OUT/cupti_persist.log" | tail -14
fi
if [ -n "${RESIDUAL:-}" ]; then  # how long a window switch keeps costing, per window kind
    timeout "${RESIDUAL_LIMIT:-150}" python3 benchmarks/switch_residual.py --rounds "${RESIDUAL_ROUNDS:-3}" --attached \
        --json "$OUT/switch_residual.json" 2>&1 | tee "$OUT/switch_residual.log" | tail -40
fi
if [ -n "${NULLS:-}" ]; then  # the twin's own null (both sides plain timers) on matrix rows, e.g. NULLS="sim_eager sb3_sac"
    for row in $NULLS; do
        case $row in
            sim_eager) cmd="benchmarks/validation_workloads.py sim_eager --device cuda --scale ${SCALE:-0.5}" ;;
            ppo_gpu) cmd="benchmarks/validation_workloads.py ppo_gpu --scale ${PPO_GPU_SCALE:-2}" ;;
            sb3_sac) cmd="benchmarks/thirdparty/sb3_sac.py --device cuda --timesteps 400" ;;
            sb3_ppo) cmd="benchmarks/thirdparty/sb3_ppo.py --device cuda --timesteps ${SB3_PPO_STEPS_A:-8192} --n-steps 256" ;;
            *) echo "NULLS: unknown row $row"; continue ;;
        esac
        echo "== null $row"
        # shellcheck disable=SC2086  # cmd: the row's arguments, split on spaces
        timeout "${NULL_LIMIT:-150}" python3 benchmarks/twin_null.py --reps "${NULL_REPS:-4}" --json "$OUT/null_$row.json" \
            -- python3 $cmd 2>&1 | grep -v "^rlscope: warning" | tee "$OUT/null_$row.log" | tail -9
    done
fi
val() {  # name, cores, seconds limit, command...
    local name=$1 cores=$2 limit=$3
    shift 3
    # shellcheck disable=SC2086  # VOPTS: extra validate options, split on spaces
    # WARMUP=1: validate's untimed first run (the first process after set-up ran 10-45% slow)
    local warm=--no-warmup
    [ -n "${WARMUP:-}" ] && warm=
    # --time-limit a little inside the hard timeout: no repetition is started that the timeout would cut
    # (and a SIGTERM from the timeout still keeps the repetitions done)
    timeout "$limit" taskset -c "$cores" python3 -m rlscope.cli.main validate --reps "$REPS" $warm ${VOPTS:-} \
        --time-limit "$((limit - ${LIMIT_MARGIN:-10}))" \
        --json "$OUT/val_$name.json" --trace-dir "/tmp/val-$name" -- "$@" > "$OUT/val_$name.log" 2>&1
    echo "== $name (exit $?, cores $cores)"
    # KEEP_TRACES=1: the profiled runs' traces come back too (to look at the windows offline)
    [ -n "${KEEP_TRACES:-}" ] && cp -r "/tmp/val-$name" "$OUT/traces-$name"
    grep -v "^rlscope: warning" "$OUT/val_$name.log" | tail -12
}
# pairs run side by side on disjoint cores (16 on the device): a CPU-only workload beside a GPU one, never two GPU ones;
# CPU workloads on one torch thread (8 spin-waiting intra-op threads made the CPU PPO 5x slower there)
# VAL: one or more of the cases below, run in order (e.g. VAL="sim_eager sb3_ppo")
VALS=${VAL:-all}
for VAL in $VALS; do
VAL_SKIP=
if [ "$VAL" = sb3 ] || [ "$VAL" = sac ] || [ "$VAL" = sb3_ppo ]; then  # the third-party rows alone
case $VAL in sac) VAL_SKIP="sim_eager sb3_ppo" ;; sb3_ppo) VAL_SKIP="sim_eager sb3_sac" ;; *) VAL_SKIP=sim_eager ;; esac
VAL=rest
fi
if [ "$VAL" = all ] || [ "$VAL" = a ]; then
# PPO-GPU at scale 2 (4-5 s measured in a ~14 s process): at 0.5 (1 s in ~11 s) a run held five window
# switches, no operation paired its windows, and `backprop` read +11% over 10 runs (BENCHMARKS.md §9,
# twenty-fourth session); the process's start-up, not the measured part, is most of a repetition's cost
val ppo_gpu 0-7 "${LIM_A:-200}" python3 benchmarks/validation_workloads.py ppo_gpu --scale "${PPO_GPU_SCALE:-2}" &
OMP_NUM_THREADS=1 val ppo_cpu 8-15 "${LIM_A:-170}" python3 benchmarks/validation_workloads.py ppo_cpu &
wait
# --n-steps 256 with 4 envs: 1,024 steps an update. 8,192 steps, eight `train` calls: at 2,048 (two
# calls, the first one cold, ~3 s measured) the run held ~7 window switches, `train` fell back to the
# pooled cost, and the row read +12-13% on both devices (twenty-ninth session); at 8,192 +3.6% (H200)
# and +6.2% (H100). ~170 s for 4 repetitions on an H200, 3 in 210 s on an H100: LIM_SB3 gives it its own limit
val sb3_ppo 0-7 "${LIM_SB3:-240}" python3 benchmarks/thirdparty/sb3_ppo.py --device cuda --timesteps "${SB3_PPO_STEPS_A:-8192}" --n-steps 256 &
OMP_NUM_THREADS=1 val dqn 8-15 "${LIM_A:-170}" python3 benchmarks/validation_workloads.py dqn --scale "${SCALE:-0.5}" &
wait
fi
if [ "$VAL" = all ] || [ "$VAL" = b ]; then
# one after the other, each alone: both rows launch GPU work, and side by side they time-shared the
# GPU (an H200, 2026-11-26: SB3 SAC's unprofiled runs varied by +-14% beside the eager simulator,
# +-5% alone)
val sim_eager 0-15 "${LIM_B:-150}" python3 benchmarks/validation_workloads.py sim_eager --device cuda --scale "${SCALE:-0.5}"
val sb3_sac 0-15 "${LIM_B:-150}" python3 benchmarks/thirdparty/sb3_sac.py --device cuda --timesteps 400
fi
if [ "$VAL" = ppo_gpu ] || [ "$VAL" = alone ]; then  # PPO-GPU alone on the machine (no neighbour)
val ppo_gpu 0-15 "${VAL_LIMIT:-200}" python3 benchmarks/validation_workloads.py ppo_gpu --scale "${PPO_GPU_SCALE:-2}"
fi
if [ "$VAL" = alone ] || [ "$VAL" = sim_eager ]; then
val sim_eager 0-15 "${VAL_LIMIT:-150}" python3 benchmarks/validation_workloads.py sim_eager --device cuda --scale "${SIM_SCALE:-${SCALE:-0.5}}"
fi
if [ "$VAL" = cpu_dqn ]; then  # PPO-CPU and DQN one after the other, alone on the machine
OMP_NUM_THREADS=1 val dqn 0-15 "${VAL_LIMIT:-200}" python3 benchmarks/validation_workloads.py dqn --scale "${SCALE:-0.5}"
OMP_NUM_THREADS=1 val ppo_cpu 0-15 "${VAL_LIMIT:-200}" python3 benchmarks/validation_workloads.py ppo_cpu --scale "${PPO_CPU_SCALE:-${SCALE:-0.5}}"
fi
if [ "$VAL" = rest ]; then  # the rows not yet measured on the devices, one at a time, alone on the machine
[[ " ${VAL_SKIP:-} " = *" sim_eager "* ]] || val sim_eager 0-15 "${VAL_LIMIT:-170}" python3 benchmarks/validation_workloads.py sim_eager --device cuda --scale "${SIM_SCALE:-1}"
[[ " ${VAL_SKIP:-} " = *" sb3_ppo "* ]] || val sb3_ppo 0-15 "${VAL_LIMIT:-170}" python3 benchmarks/thirdparty/sb3_ppo.py --device cuda --timesteps "${SB3_PPO_STEPS:-4096}" --n-steps 256
[[ " ${VAL_SKIP:-} " = *" sb3_sac "* ]] || val sb3_sac 0-15 "${VAL_LIMIT:-170}" python3 benchmarks/thirdparty/sb3_sac.py --device cuda --timesteps "${SB3_SAC_STEPS:-800}"
fi
# two rows side by side on disjoint cores (runs pinned to 2-5 and 9-12; CPU rows on one torch thread):
# cpu_pair: DQN beside PPO-CPU; pair1: DQN beside SB3 PPO; pair2: PPO-CPU beside SB3 SAC; pairs: pair1 then pair2
dqn_row() { OMP_NUM_THREADS=1 VOPTS="${VOPTS:-} --cpus 2-5" val dqn 0-7 "${VAL_LIMIT:-280}" python3 benchmarks/validation_workloads.py dqn --scale "${SCALE:-1}"; }
ppo_cpu_row() { OMP_NUM_THREADS=1 VOPTS="${VOPTS:-} --cpus $1" val ppo_cpu "$2" "${VAL_LIMIT:-280}" python3 benchmarks/validation_workloads.py ppo_cpu --scale "${PPO_CPU_SCALE:-${SCALE:-1}}"; }
case $VAL in cpu_pair) dqn_row & ppo_cpu_row 9-12 8-15 & wait ;; esac
case $VAL in pair1|pairs)
    dqn_row &
    VOPTS="${VOPTS:-} --cpus 9-12" val sb3_ppo 8-15 "${VAL_LIMIT:-280}" python3 benchmarks/thirdparty/sb3_ppo.py --device cuda --timesteps "${SB3_PPO_STEPS:-2048}" --n-steps 256 &
    wait ;;
esac
case $VAL in pair2|pairs)
    ppo_cpu_row 2-5 0-7 &
    VOPTS="${VOPTS:-} --cpus 9-12" val sb3_sac 8-15 "${VAL_LIMIT:-280}" python3 benchmarks/thirdparty/sb3_sac.py --device cuda --timesteps "${SB3_SAC_STEPS:-300}" &
    wait ;;
esac
if [ "$VAL" = sim_memwin ]; then  # the eager simulator with GPU memory in full windows only, then with the default tracker
RLSCOPE_GPU_MEMORY=windows val sim_eager_memwin 0-15 "${VAL_LIMIT:-150}" python3 benchmarks/validation_workloads.py sim_eager --device cuda --scale "${SIM_SCALE:-${SCALE:-0.5}}"
val sim_eager 0-15 "${VAL_LIMIT:-150}" python3 benchmarks/validation_workloads.py sim_eager --device cuda --scale "${SIM_SCALE:-${SCALE:-0.5}}"
fi
if [ "$VAL" = sim_configs ]; then  # the eager simulator without GPU tracing, and without the memory recorder
VOPTS="${VOPTS:-} --gpu off" val sim_eager_nogpu 0-15 "${VAL_LIMIT:-170}" python3 benchmarks/validation_workloads.py sim_eager --device cuda --scale "${SIM_SCALE:-1}"
RLSCOPE_GPU_MEMORY=0 val sim_eager_nomem 0-15 "${VAL_LIMIT:-170}" python3 benchmarks/validation_workloads.py sim_eager --device cuda --scale "${SIM_SCALE:-1}"
fi
if [ "$VAL" = sim_touch ]; then  # the eager simulator with CUPTI attached and detached once before the timed region, in every mode, then without
val sim_eager_touch 0-15 "${VAL_LIMIT:-170}" python3 benchmarks/validation_workloads.py sim_eager --device cuda --scale "${SIM_SCALE:-1}" --touch-cupti
val sim_eager 0-15 "${VAL_LIMIT:-170}" python3 benchmarks/validation_workloads.py sim_eager --device cuda --scale "${SIM_SCALE:-1}"
fi
if [ "$VAL" = sim_nvml ]; then  # the eager simulator without the NVML sampler thread, then with it (the default)
VOPTS="${VOPTS:-} --set nvml_hz=0" val sim_eager_nonvml 0-15 "${VAL_LIMIT:-170}" python3 benchmarks/validation_workloads.py sim_eager --device cuda --scale "${SIM_SCALE:-1}"
val sim_eager 0-15 "${VAL_LIMIT:-170}" python3 benchmarks/validation_workloads.py sim_eager --device cuda --scale "${SIM_SCALE:-1}"
fi
if [ "$VAL" = configs ]; then
# which collector state costs what on PPO-GPU: nearly always light windows (CUPTI attached but off),
# no GPU tracing at all, and GPU tracing without driver-API records; side by side on disjoint cores
VOPTS="--set full_share=0.05" val ppo_gpu_light 0-4 200 python3 benchmarks/validation_workloads.py ppo_gpu --scale "${SCALE:-0.5}" &
VOPTS="--gpu off" val ppo_gpu_nogpu 5-9 200 python3 benchmarks/validation_workloads.py ppo_gpu --scale "${SCALE:-0.5}" &
RLSCOPE_CUPTI_KINDS=kernel,runtime,memcpy,memset val ppo_gpu_runtime 10-15 200 python3 benchmarks/validation_workloads.py ppo_gpu --scale "${SCALE:-0.5}" &
wait
fi
done  # VALS
[ "$RLSCOPE_CALIBRATION_DIR" != "$OUT/calibration" ] && cp -r "$RLSCOPE_CALIBRATION_DIR" "$OUT/calibration"
[ -f /tmp/procstat.pid ] && kill "$(cat /tmp/procstat.pid)" && rm -f /tmp/procstat.pid

# at most 8 files of 16 MiB come back from the device: bundle the results, and each kept trace set in its own
# (benchmarks/window_estimators.py re-analyzes them here with other estimators against the same truth)
( cd "$OUT" && for d in traces-*; do [ -d "$d" ] && tar czf "$d.tgz" "$d" && rm -rf "$d"; done
  tar czf results.tgz --exclude='*.tgz' --exclude=pass.log --warning=no-file-changed . ; find . -mindepth 1 ! -name '*.tgz' ! -name pass.log -exec rm -rf {} + )
