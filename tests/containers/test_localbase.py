"""Where the local base images come from, and when the cache is reused."""

from __future__ import annotations

from pathlib import Path

from containers import localbase


def test_mirror_from_deb822_sources(tmp_path: Path) -> None:
    d = tmp_path / "sources.list.d"
    d.mkdir()
    (d / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\n\n"
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\n"
    )
    assert localbase.debian_mirror([tmp_path / "sources.list", d]) == "http://mirror.example/debian"


def test_mirror_from_one_line_sources(tmp_path: Path) -> None:
    f = tmp_path / "sources.list"
    f.write_text("# comment\ndeb [arch=amd64] http://other.example/debian bookworm main\n")
    assert localbase.debian_mirror([f]) == "http://other.example/debian"


def test_mirror_default(tmp_path: Path) -> None:
    assert localbase.debian_mirror([tmp_path / "missing"]) == localbase.DEFAULT_MIRROR


def test_cache_key_follows_every_input(monkeypatch) -> None:
    key = localbase.cache_key("training", "http://a")
    assert key == localbase.cache_key("training", "http://a")
    assert key != localbase.cache_key("training", "http://b")
    assert key != localbase.cache_key("serving", "http://a")
    monkeypatch.setattr(
        localbase, "PYTHON_PACKAGES", {**localbase.PYTHON_PACKAGES, "training": ("torch==9",)}
    )
    assert key != localbase.cache_key("training", "http://a")
