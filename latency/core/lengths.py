"""Prompt and output lengths of a generation workload: a number, or a distribution by name.

``256`` (every request the same), ``uniform:16:128`` (whole numbers from 16 to 128, each as
likely), ``lognormal:512:0.8`` (median 512 tokens, shape 0.8: the long tail real prompts have).
Draws are whole numbers of at least 1, clipped to ``MAX_TOKENS``, from the run's seeded
generator, so a workload is repeatable.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from latency.core.errors import ConfigError

#: the most tokens a prompt or an output may have (longer than any context we serve)
MAX_TOKENS = 1_000_000
KINDS = ("fixed", "uniform", "lognormal")
MAX_SIGMA = 5.0


@dataclass(frozen=True)
class LengthSpec:
    """A distribution of token counts (see the module docstring)."""

    kind: str
    a: float
    b: float = 0.0

    @classmethod
    def parse(cls, text: object, flag: str) -> LengthSpec:
        """``text`` as a spec; ConfigError (one line, naming ``flag``) when it does not parse."""
        s = str(text).strip().lower()
        parts = s.split(":")
        usage = (f"{flag} must be a number of tokens (e.g. 256), uniform:MIN:MAX or "
                 f"lognormal:MEDIAN:SIGMA (got {text!r})")
        try:
            if len(parts) == 1:
                n = _whole(parts[0])
                spec = cls("fixed", n)
            elif len(parts) == 3 and parts[0] == "uniform":
                lo, hi = _whole(parts[1]), _whole(parts[2])
                if hi < lo:
                    raise ConfigError(f"{flag} uniform:{lo}:{hi}: MIN must not exceed MAX")
                spec = cls("uniform", lo, hi)
            elif len(parts) == 3 and parts[0] == "lognormal":
                median, sigma = float(parts[1]), float(parts[2])
                if not (math.isfinite(median) and 1 <= median <= MAX_TOKENS):
                    raise ConfigError(f"{flag} lognormal: the median must be from 1 to "
                                      f"{MAX_TOKENS:,} tokens (got {parts[1]})")
                if not (math.isfinite(sigma) and 0 < sigma <= MAX_SIGMA):
                    raise ConfigError(f"{flag} lognormal: sigma must be > 0 and <= "
                                      f"{MAX_SIGMA:g} (got {parts[2]})")
                spec = cls("lognormal", median, sigma)
            else:
                raise ConfigError(usage)
        except ConfigError:
            raise
        except _NotWhole as exc:
            raise ConfigError(f"{flag}: {exc} (got {text!r})") from None
        except ValueError:
            raise ConfigError(usage) from None
        if spec.high > MAX_TOKENS:
            raise ConfigError(f"{flag} must be at most {MAX_TOKENS:,} tokens (got {text!r})")
        return spec

    @property
    def low(self) -> int:
        """The fewest tokens a draw can give."""
        return 1 if self.kind == "lognormal" else int(self.a)

    @property
    def high(self) -> int:
        """The most tokens a draw can give (a lognormal's 99.99th percentile, clipped)."""
        if self.kind == "fixed":
            return int(self.a)
        if self.kind == "uniform":
            return int(self.b)
        return math.ceil(min(float(MAX_TOKENS), self.a * math.exp(3.719 * self.b)))

    @property
    def mean(self) -> float:
        if self.kind == "fixed":
            return float(self.a)
        if self.kind == "uniform":
            return (self.a + self.b) / 2
        return float(self.a * math.exp(self.b ** 2 / 2))

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` draws (int64, each from ``low`` to ``high``)."""
        if self.kind == "fixed":
            return np.full(n, int(self.a), dtype=np.int64)
        if self.kind == "uniform":
            return rng.integers(int(self.a), int(self.b) + 1, size=n, dtype=np.int64)
        x = np.round(self.a * np.exp(self.b * rng.standard_normal(n)))
        return np.clip(x, 1, self.high).astype(np.int64)

    def __str__(self) -> str:
        if self.kind == "fixed":
            return str(int(self.a))
        if self.kind == "uniform":
            return f"uniform:{int(self.a)}:{int(self.b)}"
        return f"lognormal:{self.a:g}:{self.b:g}"


    @classmethod
    def of(cls, value: object, flag: str) -> LengthSpec:
        """``value`` as a spec: a spec itself, its text or a count (``parse``), or its fields
        as a dict (what ``dataclasses.asdict`` makes of one)."""
        if isinstance(value, LengthSpec):
            return value
        if isinstance(value, dict) and set(value) <= {"kind", "a", "b"}:
            return cls.parse(cls(**value), flag)  # (its text, checked again)
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise ConfigError(f"{flag} must be a number of tokens or a distribution "
                              f"(got {type(value).__name__})")
        return cls.parse(value, flag)


#: tokens each request generates when ``--output-tokens`` is not given
DEFAULT_OUTPUT_TOKENS = LengthSpec("fixed", 64)


class _NotWhole(ValueError):
    """A number that is not a whole count of tokens of at least 1."""


def _whole(text: str) -> int:
    value = float(text)  # ValueError: not a number at all
    if not math.isfinite(value) or value != int(value) or value < 1:
        raise _NotWhole("a token count must be a whole number >= 1")
    return int(value)


#: the most distinct shared prefixes a run makes (a run makes at most 4,096 distinct prompts)
MAX_PREFIXES = 4096


def shared_prefix_of(text: str) -> tuple[int, int]:
    """``--shared-prefix N:TOKENS`` as (N prefixes, TOKENS tokens each); ConfigError (one
    line) for anything else."""
    parts = str(text).strip().split(":")
    usage = f"--shared-prefix must be N:TOKENS, e.g. 4:512 (got {text!r})"
    if len(parts) != 2:
        raise ConfigError(usage)
    try:
        count, tokens = _whole(parts[0]), _whole(parts[1])
    except ValueError:
        raise ConfigError(usage) from None
    if count > MAX_PREFIXES or tokens > MAX_TOKENS:
        raise ConfigError(f"--shared-prefix: N must be from 1 to {MAX_PREFIXES:,} and TOKENS "
                          f"from 1 to {MAX_TOKENS:,} (got {text})")
    return count, tokens
