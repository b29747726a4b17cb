"""The settings a generation simulation changes from its recorded run: the scheduler's, the
lengths, the objectives and the what-if scales — ``simulate``'s flags (their metadata), each
meaning what the run's flag of the same name means (its help is that field's), and None
meaning "as the recorded run had it".
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from latency.core.config import BATCHING, field_help
from latency.core.flags import flag
from latency.simulation.service import SIMULATE

#: the help section of these flags in ``simulate --help``
GEN_SIM = "generation (with --from-run of a generation run)"
AS_RECORDED = "the --from-run run's"


def _as_run(name: str, **kw: Any) -> dict[str, Any]:
    """A flag meaning what RunConfig's ``name`` means, unset meaning as recorded."""
    kw.setdefault("default_text", AS_RECORDED)
    return flag("--" + name.replace("_", "-"), field_help(name), commands=SIMULATE,
                group=GEN_SIM, unset=True, **kw)


@dataclass(frozen=True)
class GenSimSettings:
    """What a generation simulation changes (see the module docstring)."""

    prompt_tokens: str | None = field(default=None, metadata=_as_run(
        "prompt_tokens", metavar="SPEC", default_text="the run's requests' own lengths"))
    output_tokens: str | None = field(default=None, metadata=_as_run(
        "output_tokens", metavar="SPEC", default_text="the run's requests' own lengths"))
    max_running: int | None = field(default=None, metadata=_as_run("max_running", type="int"))
    max_step_tokens: int | None = field(default=None, metadata=_as_run(
        "max_step_tokens", type="int"))
    chunked_prefill: int | None = field(default=None, metadata=_as_run(
        "chunked_prefill", type="int", metavar="N",
        default_text=AS_RECORDED + "; 0 turns it off"))
    kv_tokens: int | None = field(default=None, metadata=_as_run(
        "kv_tokens", type="int", metavar="N"))
    batching: str | None = field(default=None, metadata=_as_run("batching", choices=BATCHING))
    slo: str | None = field(default=None, metadata=_as_run("slo", metavar="PRESET"))
    slo_ttft_ms: float | None = field(default=None, metadata=_as_run(
        "slo_ttft_ms", type="float", metavar="MS"))
    slo_tpot_ms: float | None = field(default=None, metadata=_as_run(
        "slo_tpot_ms", type="float", metavar="MS"))
    slo_e2e_ms: float | None = field(default=None, metadata=_as_run(
        "slo_e2e_ms", type="float", metavar="MS"))
    decode_scale: float | None = field(default=None, metadata=flag(
        "--decode-scale", "What if: every decode call takes this many times the fitted time "
        "(0.6: a 40 %% faster decode step).".replace("%%", "%"), commands=SIMULATE,
        group=GEN_SIM, type="float", unset=True, default_text="1"))
    prefill_scale: float | None = field(default=None, metadata=flag(
        "--prefill-scale", "What if: every prefill call takes this many times the fitted "
        "time.", commands=SIMULATE, group=GEN_SIM, type="float", unset=True,
        default_text="1"))

    def given(self) -> dict[str, Any]:
        """The settings given (not None), by name."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if getattr(self, f.name) is not None}


#: the generation settings, by name: what ``simulate`` refuses without a generation run
GEN_SETTINGS: tuple[str, ...] = tuple(f.name for f in fields(GenSimSettings))
