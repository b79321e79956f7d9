"""collectors/native_build.py: the one cache variable, the cache key, and a build that leaves either
the library or nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rlscope.collectors import native_build


def test_cache_dir_variable_wins_over_its_deprecated_alias_and_the_home_default(monkeypatch, tmp_path):
    monkeypatch.delenv("RLSCOPE_CACHE_DIR", raising=False)
    monkeypatch.delenv("RLSCOPE_CACHE", raising=False)
    assert native_build.cache_root() == Path.home() / ".cache" / "rlscope"
    monkeypatch.setenv("RLSCOPE_CACHE", str(tmp_path / "old"))
    assert native_build.cache_root() == tmp_path / "old"
    monkeypatch.setenv("RLSCOPE_CACHE_DIR", str(tmp_path / "new"))
    assert native_build.cache_root() == tmp_path / "new"
    assert native_build.build_dir() == tmp_path / "new" / "build"


def test_cache_key_follows_every_input_and_a_changed_compiler(tmp_path):
    cc = tmp_path / "cc"
    cc.write_text("a")
    key = native_build.cache_key(b"source", "3.11", cc)
    assert key == native_build.cache_key(b"source", "3.11", cc) and len(key) == 16
    assert key != native_build.cache_key(b"source2", "3.11", cc)
    assert key != native_build.cache_key(b"source", "3.12", cc)
    cc.write_text("a newer compiler")
    assert key != native_build.cache_key(b"source", "3.11", cc)


def _cc() -> Path:
    cc = native_build.find_compiler("cc", "gcc")
    if cc is None:
        pytest.skip("no C compiler")
    return cc


def test_build_compiles_once_and_a_failure_leaves_nothing(monkeypatch, tmp_path):
    cc = _cc()
    monkeypatch.setenv("RLSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "ok.c"
    src.write_text("int answer(void) { return 42; }\n")
    out = native_build.build_dir() / "ok.so"
    calls = []

    def command(tmp: str) -> list[str]:
        calls.append(tmp)
        return [str(cc), "-shared", "-fPIC", str(src), "-o", tmp]

    assert native_build.build(out, command, "the test library") == out and out.exists()
    assert native_build.build(out, command, "the test library") == out and len(calls) == 1  # cached
    bad = tmp_path / "bad.c"
    bad.write_text('#error "does not build"\n')
    failed = native_build.build_dir() / "bad.so"
    with pytest.raises(
        native_build.BuildError, match=r"building the test library failed: .*does not build"
    ) as e:
        native_build.build(failed, lambda tmp: [str(cc), "-shared", str(bad), "-o", tmp], "the test library")
    assert "\n" not in str(e.value)
    assert sorted(p.name for p in native_build.build_dir().iterdir()) == ["ok.so"]  # no temporary left


def test_an_unwritable_cache_is_a_one_line_build_error(monkeypatch, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv("RLSCOPE_CACHE_DIR", str(blocker))
    with pytest.raises(native_build.BuildError, match="cannot build the test library in"):
        native_build.build(native_build.build_dir() / "x.so", lambda tmp: ["true"], "the test library")


def test_no_compiler_is_none(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert native_build.find_compiler("cc", "gcc") is None
