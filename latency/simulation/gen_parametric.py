"""A generation server whose costs you set, not measured: synthetic-lm's, simulated.

Before any generation run is recorded, the Load Simulator needs a server to simulate; this is
one whose every cost is a number you chose — synthetic-lm's own arguments (a prefill call of
``prefill_ms`` + ``prefill_ms_per_token`` × its prompt tokens, a decode step of ``step_ms`` +
``step_ms_per_seq`` × its sequences + ``step_ms_per_context_token`` × the tokens they hold), so
the same setting can be run for real (synthetic-lm holds those times) and set beside the
prediction. Unlike a fitted server it has no work of its own (scheduling, tokenizing,
detokenizing, handing tokens over) and no spread: each step takes exactly its calls' time. A
recorded run's fit (``gen_service``) has both, measured.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from latency.core.config import RunConfig
from latency.core.errors import ConfigError
from latency.core.lengths import LengthSpec
from latency.simulation.config import SimConfig
from latency.simulation.gen_replay import MAX_DRAWS, GenSimSetup
from latency.simulation.gen_service import RATIO_QUANTILES, GenService
from latency.simulation.gen_step_cost import StepCost

#: synthetic-lm's cost arguments a parametric server takes (their defaults and help are
#: synthetic-lm's own ``model_args``; the dashboard reads them from there)
COST_ARGS: tuple[str, ...] = ("prefill_ms", "prefill_ms_per_token", "step_ms", "step_ms_per_seq",
                              "step_ms_per_context_token")
#: the most a cost may be (ms), as synthetic-lm takes it
MAX_COST_MS = 10_000.0


@dataclass(frozen=True)
class ParametricCosts:
    """The costs set (ms), synthetic-lm's arguments by name, and the longest context."""

    prefill_ms: float
    prefill_ms_per_token: float
    step_ms: float
    step_ms_per_seq: float
    max_context: int
    step_ms_per_context_token: float = 0.0

    def model_args(self) -> dict[str, Any]:
        """synthetic-lm's arguments holding these costs (for a run that checks them)."""
        return {k: getattr(self, k) for k in (*COST_ARGS, "max_context")}

    def service(self) -> GenService:
        """The server: its calls exactly these costs, nothing else, no spread."""
        for name in COST_ARGS:
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and 0 <= value <= MAX_COST_MS):
                raise ConfigError(f"{name} must be from 0 to {MAX_COST_MS:g} ms "
                                  f"(got {value!r})")
        calls = StepCost(fixed_ms=0.0, prefill_fixed_ms=self.prefill_ms,
                         per_prefill_token_ms=self.prefill_ms_per_token,
                         decode_fixed_ms=self.step_ms, per_sequence_ms=self.step_ms_per_seq,
                         per_kv_token_ms=self.step_ms_per_context_token)
        return GenService(calls=calls, step_own_ms=0.0,
                          step_ratio={"all": (1.0,) * RATIO_QUANTILES},
                          max_context=int(self.max_context),
                          seen_prefill_tokens=10 ** 9, seen_decode_seqs=10 ** 6, step_r2=1.0)

    def describe(self) -> str:
        kv = (f" + {self.step_ms_per_context_token:g} ms/context token"
              if self.step_ms_per_context_token else "")
        return (f"a parametric server (costs set, not measured): prefill {self.prefill_ms:g} + "
                f"{self.prefill_ms_per_token:g} ms/prompt token, decode step {self.step_ms:g} + "
                f"{self.step_ms_per_seq:g} ms/sequence{kv}; no work of its own, no spread")


def parametric_setup(costs: ParametricCosts, *, prompt_tokens: str, output_tokens: str,
                     rate: float | None = None, clients: int | None = None,
                     arrival: str = "poisson", replicas: int = 1, requests: int = 400,
                     seed: int = 0, **scheduler: Any) -> GenSimSetup:
    """The simulation of the parametric server under this load and scheduler (``scheduler``:
    RunConfig's scheduler and objective fields). ConfigError, one line, for a bad setting."""
    if (rate is None) == (clients is None):
        raise ConfigError("give one of a rate (open loop) and clients (closed loop)")
    prompt_spec = LengthSpec.of(prompt_tokens, "--prompt-tokens")
    output_spec = LengthSpec.of(output_tokens, "--output-tokens")
    config = RunConfig(model="synthetic-lm", model_args=costs.model_args(),
                       prompt_tokens=prompt_spec, output_tokens=output_spec,
                       rate=rate, concurrency=clients, arrival=arrival, replicas=replicas,
                       requests=requests, seed=seed,
                       **{k: v for k, v in scheduler.items() if v is not None})
    config._check_generation()
    rng = np.random.default_rng(seed)
    prompts = prompt_spec.draw(rng, MAX_DRAWS)
    outputs = output_spec.draw(rng, MAX_DRAWS)
    load = SimConfig(rate=rate or 1.0, clients=clients, arrival=arrival, replicas=replicas,
                     requests=requests, seed=seed).checked()
    how = (f"{clients} closed-loop client(s)" if clients else
           f"{arrival} arrivals at {rate:g}/s")
    about = {"from_run": None, "load": how,
             "lengths": f"prompts {prompt_spec} tokens, outputs {output_spec} tokens",
             "decode_scale": 1.0, "prefill_scale": 1.0, "fit": costs.describe()}
    return GenSimSetup(config, load, costs.service(), prompts, outputs, about)

