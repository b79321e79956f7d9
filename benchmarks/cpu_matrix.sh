#!/usr/bin/env bash
# The validation matrix on a CPU machine, from a fresh clone with nothing cached: every workload of
# BENCHMARKS.md's matrix under `rlscope validate`, one at a time, results under $OUT.
#   bash benchmarks/cpu_matrix.sh            (REPS=5; FRESH=1: clone HEAD into a temporary directory
#                                             and run there with an empty HOME, so no calibration or
#                                             built recorder is reused; ONLY="dqn sb3_sac" runs a subset;
#                                             VOPTS: validate's options, --twin by default, VOPTS= for
#                                             separate runs)
# Needs the bench extras (stable-baselines3, gymnasium) importable. Takes the lock other benchmarks
# take (/tmp/rlscope-bench.lock), so two heavy jobs never share the machine's cores.
set -uo pipefail
OUT=${OUT:-/tmp/rlscope-cpu-matrix}
REPS=${REPS:-5}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
if [ -n "${FRESH:-}" ]; then
    fresh=$(mktemp -d)
    git clone -q "$(git rev-parse --show-toplevel)" "$fresh/rlscope" || exit 1
    mkdir "$fresh/home"
    export HOME="$fresh/home"
    unset RLSCOPE_CALIBRATION_DIR RLSCOPE_CACHE XDG_CACHE_HOME
    cd "$fresh/rlscope" || exit 1
    # the clone's rlscope, installed as the package it is (rlscope.collectors lives in collectors/,
    # mapped by pyproject.toml: the clone on PYTHONPATH alone cannot import it), in a venv that sees
    # the machine's torch, bench extras, pip and setuptools (no pip of its own: its bundled setuptools
    # shadowed the machine's and could not build)
    python3 -m venv --system-site-packages --without-pip "$fresh/venv" || exit 1
    "$fresh/venv/bin/python" -m pip install -q --no-deps --no-build-isolation -e . >/dev/null || exit 1
    export PATH="$fresh/venv/bin:$PATH"
    echo "fresh clone $(git rev-parse --short HEAD) in $fresh, HOME=$HOME" | tee "$OUT/fresh.txt"
fi
export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1  # one torch thread: see benchmarks/thirdparty/sb3_ppo.py
python3 -c "import rlscope, rlscope.collectors as c; print('rlscope from', rlscope.__file__, c.__file__)" | tee -a "$OUT/fresh.txt"
val() {  # name, command...
    local name=$1
    shift
    case " ${ONLY:-$name} " in *" $name "*) ;; *) return ;; esac
    echo "== $name: $(uptime)" | tee -a "$OUT/load.txt"
    ( time flock /tmp/rlscope-bench.lock python3 -m rlscope.cli.main validate --reps "$REPS" ${VOPTS-"--twin"} \
        --json "$OUT/val_$name.json" --trace-dir "$OUT/trace-$name" -- "$@" ) > "$OUT/val_$name.log" 2>&1
    echo "   exit $?, $(uptime)" | tee -a "$OUT/load.txt"
    grep -v "^rlscope: warning" "$OUT/val_$name.log" | tail -14
}
val ppo_cpu python3 benchmarks/validation_workloads.py ppo_cpu --scale "${PPO_SCALE:-3}"
val dqn python3 benchmarks/validation_workloads.py dqn --scale "${DQN_SCALE:-2}"
val sim_eager python3 benchmarks/validation_workloads.py sim_eager --device cpu --scale "${SIM_SCALE:-2}"
val sb3_ppo python3 benchmarks/thirdparty/sb3_ppo.py --timesteps "${SB3_PPO_STEPS:-16384}"
val sb3_sac python3 benchmarks/thirdparty/sb3_sac.py --timesteps "${SB3_SAC_STEPS:-600}"
[ -n "${FRESH:-}" ] && rm -rf "${fresh:?}/rlscope/.git"  # the traces stay under $OUT
exit 0
