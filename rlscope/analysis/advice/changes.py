"""The changes the rules suggest, in the words of the library that runs the program.

Each table holds one change per library (:mod:`rlscope.analysis.advice.program`); ``None`` where the
library has no such switch (stable-baselines3 has none to compile its rollout or update), and the rule
leaves the change out. A change that alters what is learned (more envs per step, fewer or larger
minibatches) is said to be a hyperparameter; the others keep the algorithm as it is.
"""

from __future__ import annotations

from rlscope.analysis.advice import program as P
from rlscope.analysis.advice.base import Facts, pct

__all__ = [
    "COMPILE_POLICY",
    "COMPILE_UPDATE",
    "CPU_DEVICE",
    "FEWER_STEPS",
    "FUSED_OPTIMIZER",
    "MORE_ENVS",
    "PARALLEL_ENVS",
    "THREADS",
    "acting_change",
    "join",
    "update_change",
]

MORE_ENVS = {
    P.SB3: "step more envs per call with a larger n_envs (a hyperparameter: PPO collects n_steps x"
    " n_envs a rollout, so lower n_steps to keep that)",
    P.SCRIPT: "step more envs per call (CleanRL: --num-envs; a hyperparameter: for PPO lower"
    " --num-steps to keep num_steps x num_envs)",
    P.TORCHRL: "step more envs per call: a ParallelEnv or SerialEnv of more envs, frames_per_batch"
    " kept (a hyperparameter: fewer steps per env)",
    P.RLLIB: "step more envs per call: config.env_runners(num_envs_per_env_runner=N) (a"
    " hyperparameter: fewer steps per env for the same train batch)",
    P.UNKNOWN: "step more envs per call (a hyperparameter: keep the rollout's size with fewer steps per env)",
}
"""Each call's Python cost (a policy forward pass, a vector env's step) is paid once for the whole batch
of envs."""

PARALLEL_ENVS = {
    P.SB3: "step the envs in parallel processes: make_vec_env(..., vec_env_cls=SubprocVecEnv)",
    P.SCRIPT: "step the envs in parallel processes: gymnasium.vector.AsyncVectorEnv in place of"
    " SyncVectorEnv",
    P.TORCHRL: "step the envs in parallel processes: ParallelEnv in place of SerialEnv, or a"
    " MultiSyncDataCollector",
    P.RLLIB: "step the envs in more processes: config.env_runners(num_env_runners=N)",
    P.UNKNOWN: "step the envs in parallel processes (gymnasium AsyncVectorEnv, SB3 SubprocVecEnv)",
}
"""A CPU simulator's steps spread over cores: the same env steps, the same learning."""

COMPILE_POLICY: dict[str, str | None] = {
    P.SB3: None,
    P.SCRIPT: "torch.compile the function that runs the policy and samples the action (CleanRL:"
    " agent.get_action_and_value)",
    P.TORCHRL: "compile the collector's policy (compile_policy=True)",
    P.RLLIB: "compile the env runners' modules: config.framework(torch_compile_worker=True)",
    P.UNKNOWN: "torch.compile the policy's forward and action sampling",
}

COMPILE_UPDATE: dict[str, str | None] = {
    P.SB3: None,
    P.SCRIPT: "torch.compile the loss computation (the function from a minibatch to its loss)",
    P.TORCHRL: "torch.compile(loss_module)",
    P.RLLIB: "compile the learner: config.framework(torch_compile_learner=True)",
    P.UNKNOWN: "torch.compile the loss computation",
}

FUSED_OPTIMIZER = {
    P.SB3: "a fused Adam: policy_kwargs=dict(optimizer_kwargs=dict(eps=1e-5, fused=True)) for PPO (eps=1e-5"
    " is the default that passing optimizer_kwargs replaces), dict(fused=True) for SAC, TD3 and DQN",
    P.SCRIPT: "a fused optimizer: fused=True where the script makes it (torch.optim.Adam(..., fused=True))",
    P.TORCHRL: "a fused optimizer: torch.optim.Adam(loss_module.parameters(), ..., fused=True)",
    P.RLLIB: "a fused optimizer (fused=True) in the Learner's configure_optimizers_for_module",
    P.UNKNOWN: "a fused optimizer (torch.optim.Adam(..., fused=True))",
}
"""The same update, one kernel per step instead of a loop over parameters (torch 2.4 or later on the
CPU). ``zero_grad(set_to_none=True)`` is not suggested: it has been the default since torch 2.0."""

FEWER_STEPS = {
    P.SB3: "a larger batch_size, or fewer n_epochs (PPO) or gradient_steps (DQN, SAC, TD3)",
    P.SCRIPT: "fewer, larger minibatches or fewer epochs (CleanRL: --num-minibatches, --update-epochs)",
    P.TORCHRL: "fewer, larger minibatches or fewer epochs",
    P.RLLIB: "a larger minibatch_size or fewer num_epochs in config.training()",
    P.UNKNOWN: "fewer, larger minibatches or fewer epochs",
}
"""Hyperparameters: fewer, larger optimizer steps do more work per step's fixed cost, and change what is
learned, so the rules name them as such."""

CPU_DEVICE = {
    P.SB3: "device='cpu' when making the model (PPO(..., device='cpu'); stable-baselines3 itself warns"
    " that PPO with an MlpPolicy is meant for the CPU)",
    P.SCRIPT: "the CPU for the agent and its tensors (CleanRL: --no-cuda)",
    P.TORCHRL: "device='cpu' for the policy, the collector and the loss module",
    P.RLLIB: "no GPU for the learners and env runners (config.learners(num_gpus_per_learner=0))",
    P.UNKNOWN: "the CPU for the policy and the learner",
}
"""Acting and learning on the CPU: a small network's forward and backward are cheaper there than the
launches that drive a GPU."""

CPU_ACTING = {
    P.SB3: None,
    P.SCRIPT: "a CPU copy of the policy for acting, its weights copied after each update (load_state_dict)",
    P.TORCHRL: "act on the CPU: the collector's policy_device='cpu' (it copies the weights on"
    " update_policy_weights_())",
    P.RLLIB: "act on the CPU: config.env_runners(num_gpus_per_env_runner=0)",
    P.UNKNOWN: "act on the CPU: a CPU copy of the policy for rollouts, its weights copied after each update",
}
"""Acting on the CPU while learning stays on the GPU (the update's kernels are worth the GPU); SB3 has
one device for both, so it gets more envs per forward pass instead."""

THREADS = {
    P.SB3: "torch.set_num_threads(1) before the model is made (OMP_NUM_THREADS=1 in the environment"
    " reaches SubprocVecEnv workers too)",
    P.SCRIPT: "torch.set_num_threads(1) at the top of the script (OMP_NUM_THREADS=1 in the environment"
    " reaches subprocess workers too)",
    P.TORCHRL: "torch.set_num_threads(1) at the top of the script (OMP_NUM_THREADS=1 in the environment"
    " reaches ParallelEnv and collector workers too)",
    P.RLLIB: "OMP_NUM_THREADS=1 for the Ray workers (config.python_environment or the runtime_env's"
    " env_vars), or torch.set_num_threads(1) in the Learner and env runner setup",
    P.UNKNOWN: "torch.set_num_threads(1) at the top of the script (OMP_NUM_THREADS=1 in the environment"
    " reaches subprocess workers too)",
}
"""One intra-op thread per process: a small network's ops gain nothing from more, and on shared cores
the threads wait for one another."""


def join(parts: list[str | None]) -> str:
    """The parts said, one change after another."""
    return "; ".join(p for p in parts if p)


def _compile(facts: Facts, name: str, table: dict[str, str | None]) -> str | None:
    """The library's compile switch, unless the operation's samples show compiled code already."""
    if P.compiled(facts.summary, name):
        return None
    return table[facts.library]


def _fused(facts: Facts, name: str) -> str | None:
    """The fused optimizer, when the samples show the step as a loop (or cannot tell); never when they
    show it fused, or show no optimizer step among the update's top functions (fusing wins little)."""
    text = FUSED_OPTIMIZER[facts.library]
    step = P.optimizer_step(facts.summary, name)
    if step is not None:
        impl, frame = step
        if impl == "fused":
            return None
        return f"{text} (its samples run torch's {impl} step, {frame.get('function')}, in" + (
            f" {pct(float(frame.get('share', 0.0)), 1.0)} of them)"
        )
    if P.sampled(facts.summary, name):
        return None
    return f"{text}, unless it is fused already (the trace has no stack samples to tell)"


def acting_change(facts: Facts, name: str) -> str:
    """Acting with a Python-bound policy: a compiled policy (the same actions), then more envs per call (a
    hyperparameter)."""
    return join([_compile(facts, name, COMPILE_POLICY), MORE_ENVS[facts.library]])


def update_change(facts: Facts, name: str) -> str:
    """An update that costs more than its torch ops: compile and fuse what the library lets the user, and
    name the hyperparameters that do fewer, larger steps as such."""
    return join(
        [
            _compile(facts, name, COMPILE_UPDATE),
            _fused(facts, name),
            f"hyperparameters, which change what is learned: {FEWER_STEPS[facts.library]}",
        ]
    )
