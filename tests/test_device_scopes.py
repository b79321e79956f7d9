"""GPU time by jax.named_scope: HLO metadata parsed right, kernels joined to it exactly (synthetic GPU
records; the HLO recorder on jax's CPU build)."""

from __future__ import annotations

import pytest

import rlscope
from rlscope import annotate
from rlscope import categories as C
from rlscope.collectors import jax_hlo
from rlscope.trace import schema as S
from tests.conftest import summary_of, write_stream

S_ = 1e-9

HLO = """HloModule jit_update, entry_computation_layout={(f32[8,8]{1,0})->f32[8,8]{1,0}}

%fused_computation (param_0.1: f32[4,8]) -> f32[4,8] {
  %param_0.1 = f32[4,8]{1,0} parameter(0)
  ROOT %tanh.0 = f32[4,8]{1,0} tanh(%param_0.1), metadata={op_name="jit(update)/inference/tanh"}
}

%region_add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %add.9 = f32[] add(%a, %b), metadata={op_name="jit(update)/backprop/add"}
}

%body.2 (p: (s32[], f32[8,8])) -> (s32[], f32[8,8]) {
  %p = (s32[], f32[8,8]{1,0}) parameter(0)
  %gte.1 = f32[8,8]{1,0} get-tuple-element(%p), index=1
  %loop_tanh_fusion.3 = f32[4,8]{1,0} fusion(%gte.1), kind=kLoop, calls=%fused_computation, \
metadata={op_name="jit(update)/while/body/closed_call/backprop/transpose(jvp(inference))/tanh"}
  %custom-call.4 = f32[8,8]{1,0} custom-call(%gte.1), custom_call_target="__cublas$gemm", \
metadata={op_name="jit(update)/while/body/backprop/dot_general"}
  %reduce.5 = f32[] reduce(%gte.1, %c), dimensions={0,1}, to_apply=%region_add, \
metadata={op_name="jit(update)/while/body/reduce_sum"}
  ROOT %tuple.6 = (s32[], f32[8,8]{1,0}) tuple(%gte.1, %gte.1)
}

ENTRY %main.7 (Arg_0.1: f32[8,8]) -> f32[8,8] {
  %Arg_0.1 = f32[8,8]{1,0} parameter(0)
  %input_sin_fusion = f32[4,8]{1,0} fusion(%Arg_0.1), kind=kLoop, calls=%fused_computation, \
metadata={op_name="jit(update)/jit(step)/vmap(simulation)/sin"}
  %while.8 = (s32[], f32[8,8]{1,0}) while(%t), condition=%cond, body=%body.2, \
metadata={op_name="jit(update)/while"}
  ROOT %copy.9 = f32[8,8]{1,0} copy(%Arg_0.1)
}
""".replace("\\\n", "")


def test_scope_paths_unwrap_transformations_and_skip_jax_structure():
    assert jax_hlo.scope_path(
        "jit(update)/while/body/closed_call/backprop/transpose(jvp(inference))/dot"
    ) == ("backprop/inference")
    assert jax_hlo.scope_path("jit(update)/jit(policy)/inference/dense/add") == "inference/dense"
    assert jax_hlo.scope_path("jit(f)/cond/branch_1_fun/simulation/mul") == "simulation"
    assert jax_hlo.scope_path("jit(f)/add") == ""
    # jax names a loop's or branch's body after its function: structure, not a scope
    assert jax_hlo.scope_path("jit(u)/while/body/make_update.<locals>.epoch/backprop/mul") == "backprop"
    assert jax_hlo.kernel_name("loop_add_fusion.1") == "loop_add_fusion_1"
    assert jax_hlo.kernel_name("custom-call.4") == "custom_call_4"


def test_a_kernel_finds_its_instruction_through_its_pass_suffixes():
    from rlscope.analysis.device_scopes import instruction_of

    instructions = {"sort_14_1": "a", "loop_add_fusion": "b"}
    assert instruction_of(instructions, "sort_14_1__2") == "a"
    assert instruction_of(instructions, "sort_14_1") == "a"
    assert instruction_of(instructions, "loop_add_fusion_3") == "b"
    assert instruction_of(instructions, "memcpy32_post") is None


def test_kernel_launching_instructions_are_listed_with_their_scopes():
    got = dict(jax_hlo.kernels(HLO))
    assert got == {
        "loop_tanh_fusion_3": "backprop/inference",
        "custom_call_4": "backprop",
        "reduce_5": "",
        "input_sin_fusion": "simulation",
        "copy_9": "",
        "tanh_0": "inference",  # a fused part with a scope of its own, after the rest
    }  # not the reduction's computation, the parameters, tuples or the loop


def test_kernels_join_by_name_by_neighbour_and_by_the_latest_module(fake_session):
    sess, clock = fake_session
    with sess:
        t0 = clock.now
        with rlscope.scope("update"):
            clock.advance(1000)
        with rlscope.scope("other"):
            clock.advance(1000)
        ids = {n: annotate.intern(n) for n in ("f_inf", "gemm", "f_bp", "f_none", "loop_fusion", "m1", "m2")}
        paths = {p: annotate.intern(p) for p in ("inference", "backprop/inference", "simulation", "backprop")}
    thread = sess.thread_states()[0].thread
    hlo = [
        (ids["m1"], ids["f_inf"], paths["inference"], t0),
        (ids["m1"], ids["f_bp"], paths["backprop/inference"], t0),
        (ids["m1"], ids["f_none"], -1, t0),
        (ids["m1"], ids["loop_fusion"], paths["simulation"], t0),
        (ids["m2"], ids["loop_fusion"], paths["backprop"], t0 + 500),  # same name, a later module
    ]
    write_stream(sess.process_dir / S.HLO_FILE, S.HLO_COLUMNS_DOC, hlo)
    api, gpu = [], []

    def launch(corr, at, name, length, cat=C.GPU_KERNEL):
        api.append((C.CUDA_API, t0 + at, t0 + at + 5, corr, thread, -1, -1, 0, 0))
        gpu.append((cat, t0 + 3000 + 100 * corr, t0 + 3000 + 100 * corr + length, corr, -1, 0, 7, name, 0))

    launch(1, 10, ids["f_inf"], 10)  # by name: inference
    launch(2, 20, ids["gemm"], 20)  # a library kernel between two of inference: inference
    launch(3, 25, ids["f_inf"], 6)
    launch(4, 30, ids["f_bp"], 40)  # backprop (through the policy's inference scope)
    launch(5, 40, ids["f_none"], 5)  # named, in no scope
    launch(6, 50, ids["gemm"], 7)  # between no scope and simulation: no scope
    launch(7, 60, ids["f_inf"], 0, C.GPU_MEMCPY)  # a copy: no scope, and no neighbour
    launch(8, 100, ids["loop_fusion"], 11)  # before m2 was compiled: m1's simulation
    launch(9, 600, ids["loop_fusion"], 13)  # after: m2's backprop
    launch(10, 1100, ids["gemm"], 17)  # in "other", no named kernel there: no scope
    rows = sorted(api + gpu, key=lambda r: r[1])
    write_stream(sess.process_dir / S.GPU_FILE, S.GPU_COLUMNS_DOC, rows)
    d = summary_of(sess.trace_dir)["device_scopes"]
    assert d["scopes"]["inference"]["gpu_s"] == pytest.approx(36 * S_)
    assert d["scopes"]["inference"]["kernels"] == 3
    assert d["scopes"]["backprop"]["gpu_s"] == pytest.approx((40 + 13) * S_)
    assert d["scopes"]["simulation"]["gpu_s"] == pytest.approx(11 * S_)
    assert d["scopes"]["[no named scope]"]["gpu_s"] == pytest.approx((5 + 7 + 17) * S_)
    assert d["kernels"] == 9 and d["joined_by_name"] == pytest.approx(6 / 9)  # the copy is no kernel
    assert d["joined_by_neighbour"] == pytest.approx(1 / 9)
    rows = {(r["operation"], r["path"]): r["gpu_s"] for r in d["rows"]}
    assert rows[("update", "backprop/inference")] == pytest.approx(40 * S_)
    assert rows[("other", "[no named scope]")] == pytest.approx(17 * S_)
    assert d["gpu_s"] == pytest.approx(sum(r["gpu_s"] for r in d["rows"]))


def test_no_hlo_no_device_scopes(fake_session):
    sess, clock = fake_session
    with sess, rlscope.scope("update"):
        clock.advance(100)
    assert "device_scopes" not in summary_of(sess.trace_dir)


def test_a_jitted_function_s_named_scopes_are_recorded(tmp_path):
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    def loss(w, x):
        with jax.named_scope("inference"):
            y = jnp.tanh(x @ w)
        return (y**2).sum()

    @jax.jit
    def update(w, x):
        def body(c, _):
            with jax.named_scope("backprop"):
                g = jax.grad(loss)(c, x)
            return c - 0.1 * g, None

        return jax.lax.scan(body, w, None, length=3)[0]

    with rlscope.profile(tmp_path / "t", gpu=False, backend=False) as sess:
        update(jnp.ones((8, 8)), jnp.ones((4, 8))).block_until_ready()
    from rlscope.trace.reader import load_trace, name_of

    proc = load_trace(sess.trace_dir).processes[0]
    rows = proc.hlo.to_pylist()
    modules = {name_of(proc.names, r["module"], "?") for r in rows}
    assert "jit_update" in modules
    paths = {
        name_of(proc.names, r["path"], "")
        for r in rows
        if name_of(proc.names, r["module"], "") == "jit_update"
    }
    assert "backprop/inference" in paths  # the gradient through the policy, inside the scan's loop


def test_figures_per_recorded_call_and_compile_time_kernels_set_apart(fake_session):
    """Two update calls, kernels recorded for one (GPU tracing in full windows only): per call is that
    call's, the run's is per call x calls; a kernel launched while compiling (autotuning) is no scope's."""
    sess, clock = fake_session
    with sess:
        t0 = clock.now
        for _ in range(2):
            with rlscope.scope("update"):
                clock.advance(1000)
        ids = {n: annotate.intern(n) for n in ("sort_3", "sort_3_1", "m", "jit(update)")}
        path = annotate.intern("simulation")
    thread = sess.thread_states()[0].thread
    write_stream(sess.process_dir / S.HLO_FILE, S.HLO_COLUMNS_DOC, [(ids["m"], ids["sort_3"], path, t0)])
    compile_row = (t0 + 100, t0 + 300, thread, S.COMPILE_BACKEND, ids["jit(update)"])
    write_stream(sess.process_dir / S.COMPILE_FILE, S.COMPILE_COLUMNS_DOC, [compile_row])
    rows = [
        (C.CUDA_API, t0 + 200, t0 + 210, 1, thread, -1, -1, 0, 0),  # inside the compilation
        (C.CUDA_API, t0 + 500, t0 + 510, 2, thread, -1, -1, 0, 0),
        (C.CUDA_API, t0 + 600, t0 + 610, 3, thread, -1, -1, 0, 0),
        (C.GPU_KERNEL, t0 + 250, t0 + 290, 1, -1, 0, 7, ids["sort_3"], 0),
        (C.GPU_KERNEL, t0 + 700, t0 + 730, 2, -1, 0, 7, ids["sort_3"], 0),
        (C.GPU_KERNEL, t0 + 740, t0 + 750, 3, -1, 0, 7, ids["sort_3_1"], 0),  # a second kernel of sort.3
    ]
    write_stream(sess.process_dir / S.GPU_FILE, S.GPU_COLUMNS_DOC, sorted(rows, key=lambda r: r[1]))
    d = summary_of(sess.trace_dir)["device_scopes"]
    assert d["compiling_s"] == pytest.approx(40 * S_)
    (row,) = d["rows"]
    assert row["calls_recorded"] == 1 and row["kernels"] == 2 and row["path"] == "simulation"
    assert row["per_call_s"] == pytest.approx(40 * S_)
    assert row["gpu_s"] == pytest.approx(2 * 40 * S_)  # two calls in the trace
    assert d["scopes"]["simulation"]["per_call_s"] == {"update": pytest.approx(40 * S_)}
    assert d["joined_by_name"] == 1.0


def test_tuple_typed_instructions_are_kernels():
    text = """ENTRY %main (a: f32[4]) -> f32[4] {
  %input_reduce_fusion.2 = (f32[4]{0}, f32[4]{0}) fusion(%a), kind=kInput, calls=%f, \
metadata={op_name="jit(u)/backprop/r"}
  %sort.3 = (f32[8]{0}, s32[8]{0}) sort(%a, %b), dimensions={0}, to_apply=%cmp, \
metadata={op_name="jit(u)/sort"}
  ROOT %t = ((f32[], f32[]), s32[]) tuple(%a, %b)
}
""".replace("\\\n", "")
    assert dict(jax_hlo.kernels(text)) == {"input_reduce_fusion_2": "backprop", "sort_3": ""}


def test_footer_and_html_show_each_scope_per_call_and_escaped():
    from rlscope.viz.device_scopes import footer_lines, html_section

    summary = {
        "device_scopes": {
            "gpu_s": 0.4,
            "joined_by_name": 0.9,
            "joined_by_neighbour": 0.05,
            "compiling_s": 0.0,
            "scopes": {
                "backprop": {"gpu_s": 0.3, "share": 0.75, "kernels": 10, "per_call_s": {"update": 0.003}},
                "<b>sim\x1b[2J": {"gpu_s": 0.1, "share": 0.25, "kernels": 4, "per_call_s": {"update": 0.001}},
            },
            "rows": [
                {"operation": "update", "path": "backprop", "gpu_s": 0.3, "per_call_s": 0.003, "kernels": 10}
            ],
        }
    }
    lines = footer_lines(summary)
    assert lines[0] == (
        "GPU time by jax.named_scope (400.0 ms; kernels joined to XLA's HLO: 90% by name, 5% by neighbour):"
    )
    assert lines[1] == "  backprop: 300.0 ms (75%), 3.0 ms per update"
    assert "\x1b" not in lines[2]
    html = html_section(summary)
    assert "<b>sim" not in html and "&lt;b&gt;sim" in html
    assert footer_lines({}) == [] and html_section({}) == ""
