"""The table of limits (docs/limits.md, linked from the README) says what the code enforces:
every row names the constants that set it, and the limit it states is each constant's value —
so changing a limit without its documentation fails here."""
import importlib
import re
from pathlib import Path

LIMITS = Path(__file__).resolve().parents[1] / "docs" / "limits.md"
UNITS = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def _rows() -> list[tuple[str, str, list[str]]]:
    text = LIMITS.read_text()
    table = text.split("\n\n| what | limit |", 1)[1]
    rows = []
    for line in table.splitlines()[2:]:
        if not line.startswith("|"):
            break
        what, limit, _beyond, where = (c.strip() for c in line.strip("|").split("|"))
        rows.append((what, limit, re.findall(r"`([\w.]+)`", where)))
    return rows


def _value(path: str) -> float:
    module, name = path.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)


def _shown(value: float, limit: str) -> list[str]:
    """The ways ``value`` may be written in a limit: a count, seconds, hours, or a size in the
    unit the limit uses (a byte count, or a count of that unit: ``..._MB``)."""
    whole = int(value) if float(value).is_integer() else value
    forms = [f"{whole:,}", f"{value:g}", f"{value:g} s", f"{value / 3600:g} h"]
    for unit, size in UNITS.items():
        if unit in limit:
            forms += [f"{value / size:g} {unit}", f"{value:g} {unit}"]
    return forms


def test_every_limit_in_the_readme_is_the_value_its_constant_has():
    rows = _rows()
    assert len(rows) >= 15
    for what, limit, constants in rows:
        assert constants, f"row {what!r} names no constant"
        for path in constants:
            value = _value(path)
            assert any(s in limit for s in _shown(value, limit)), (
                f"docs/limits.md says {limit!r} for {what!r}, but {path} is {value!r}")


def test_the_readme_shows_a_wrong_limit_as_wrong():
    """The check itself: a value that differs from the row's is caught."""
    assert not any(s in "1 h" for s in _shown(7200.0, "1 h"))
    assert not any(s in "64 MiB" for s in _shown(32 << 20, "64 MiB"))
    assert any(s in "10,000,000" for s in _shown(10_000_000, "10,000,000"))
