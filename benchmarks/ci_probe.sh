#!/usr/bin/env bash
# After CI's tests: the accuracy checks of BENCHMARKS.md on CI's machine, which is not the one the
# figures were tuned on, printed short enough to read in CI's log. Never fails CI (.ci/run ignores
# its exit status); everything it writes goes to a temporary directory, removed at the end.
#   bash benchmarks/ci_probe.sh            (PROBE_MATRIX=0 skips the validation matrix)
# 1. `rlscope calibrate --quick` five times beside a busy core: do the costs agree within ±20%?
# 2. benchmarks/lockstep.py on the CPU: the default profile's corrected figure per operation against
#    a twin process on the same core (the machine's speed cancels), DQN's loop and the eager simulator.
# 3. `rlscope validate --twin` on the bundled workloads (PPO-CPU, DQN, eager simulator) and, where the
#    bench extras install, stable-baselines3 PPO and SAC: 3 repetitions each (twin runs: the timed and
#    the profiled run in turns on one core, so the host's speed cancels; rlscope/overhead/validate/twin.py).
set -uo pipefail
cd "$(dirname "$0")/.."
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
export RLSCOPE_CALIBRATION_DIR="$probe/calibration" OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1
clock=$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null || echo unknown)
echo "== ci probe $(git rev-parse --short HEAD 2>/dev/null):$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)," \
    "$(nproc --all) cores, clocksource $clock, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== calibrate --quick x5 beside a busy core"
timeout 300 python benchmarks/calibration_stability.py --runs 5 --json "$probe/stability.json" 2>&1 \
    | grep -v "^rlscope: warning" | tail -16
read -r first last all < <(python -c "import os; c = sorted(os.sched_getaffinity(0)); print(c[0], c[-1], ','.join(map(str, c)))")
# DQN's with the held light CPU session beside (its own cost: what the corrected figure has left)
for loop in "dqn none,light_nogpu,default" "sim_eager none,default"; do
    read -r name configs <<<"$loop"
    echo "== lockstep --loop $name (default profile against a twin process, same core)"
    rm -rf "$RLSCOPE_CALIBRATION_DIR"  # each loop's B calibrates afresh, as a user's first run would
    timeout 420 python benchmarks/lockstep.py --device cpu --cpu "$last" --aux-cpu "$first" --park "$all" \
        --loop "$name" --configs "$configs" --pairs 30 --rounds 3 --iters 80 --a-timers 2>&1 \
        | grep -E "iter: corrected|per operation|^  " | sed -E 's/ +/ /g'
done
if [ "${PROBE_MATRIX:-1}" != 0 ]; then
    echo "== rlscope validate --twin, 3 repetitions each"
    rm -rf "$RLSCOPE_CALIBRATION_DIR"
    rows=("validation_workloads.py ppo_cpu --scale 3" "validation_workloads.py dqn --scale 2"
        "validation_workloads.py sim_eager --device cpu --scale 2")
    # the two third-party rows need the bench extras (stable-baselines3); skipped where they don't install
    if timeout 600 python -m pip install -q -e ".[bench]" >"$probe/pip.log" 2>&1; then
        rows+=("thirdparty/sb3_ppo.py --timesteps 16384" "thirdparty/sb3_sac.py --timesteps 600")
    else
        echo "-- stable-baselines3 rows skipped: $(tail -1 "$probe/pip.log")"
    fi
    for w in "${rows[@]}"; do
        # shellcheck disable=SC2086  # the workload's arguments split on purpose
        timeout 900 python -m rlscope.cli.main validate --twin --reps 3 --json "$probe/val.json" \
            --trace-dir "$probe/trace" -- python benchmarks/$w >"$probe/val.log" 2>&1
        echo "-- $w: exit $?"
        grep -E "^│|^(PASS|FAIL)" "$probe/val.log" | sed -E 's/[│ ]+/ /g; s/;.*//' | cut -c1-150
        rm -rf "$probe/trace"
    done
fi
exit 0
