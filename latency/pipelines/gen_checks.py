"""What a generation run is checked for once its pipeline is known, before anything runs.

A generative pipeline takes the generation flags and refuses the one-shot ones (its batching
is the scheduler's); a one-shot pipeline refuses the generation flags. Fixed and drawn lengths
are checked against the model's context, the KV budget and the step's token budget here, so a
run that could never serve its prompts fails in one line instead of mid-run; prompts from a
file are measured by the tokenizer and a too-long one fails its own request.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from latency.core.config import RunConfig
from latency.core.errors import ConfigError
from latency.core.gen_scheduler import refuses, scheduler_config
from latency.core.lengths import shared_prefix_of
from latency.pipelines.generative import is_generative

#: a generation run's length when none is given (a one-shot run's is 1,000 requests)
DEFAULT_GEN_REQUESTS = 100
#: a --target generation's model name until the probe finds the server's
TARGET_MODEL = "target"


def context_of(cls: Any, args: dict[str, Any]) -> int:
    """The most tokens one sequence of ``cls`` built with ``args`` may hold."""
    hook = getattr(cls, "context_for", None)
    return int(hook(args)) if callable(hook) else int(getattr(cls, "max_context", 2048))


def one_shot_flags(c: RunConfig, *more: tuple[str, bool]) -> list[str]:
    """The one-shot settings ``c`` gives (a generation takes none of them), and those of
    ``more`` ((flag, given)) that are given."""
    base = RunConfig()
    return [flag for flag, on in (
        ("--batch-size", (c.batch_size or 1) != 1),
        ("--max-batch-delay-ms", bool(c.max_batch_delay_ms)),
        ("--preprocess-workers", c.preprocess_workers != base.preprocess_workers),
        ("--inputs", c.inputs is not None), ("--optimize", bool(c.optimize)),
        ("--pre", c.pre != base.pre), ("--post", c.post != base.post),
        ("--bodies", c.bodies is not None), ("--backend ray", c.backend == "ray"),
        ("--net-*", c.wan.active), *more) if on]


def generation_checked(c: RunConfig, cls: Any, length_given: bool,
                       generation: bool = True) -> None:
    """ConfigError (one line) when the config and the pipeline do not go together;
    ``generation`` False: the caller serves one-shot requests, which a generative pipeline
    does not take."""
    if cls is None:
        return  # a factory: known once built
    if not is_generative(cls):
        flags = c.generation_flags()
        if flags:
            raise ConfigError(f"{', '.join(flags)}: generation settings, but {c.model} is not "
                              "a generative pipeline (python -m latency models lists which "
                              "are)")
        return
    if not generation:
        raise ConfigError(f"{c.model} is generative: run it as a generation (give "
                          "--output-tokens N, or any generation flag)")
    one_shot = one_shot_flags(c, ("--target", c.target is not None))
    if one_shot:
        raise ConfigError(f"{', '.join(one_shot)}: one-shot settings, but {c.model} is "
                          "generative (its batching is --max-running, --max-step-tokens and "
                          "--chunked-prefill; its inputs are --prompts)")
    if not length_given:
        c.requests = DEFAULT_GEN_REQUESTS
    context = context_of(cls, c.model_args or {})
    out = c.output_tokens
    if out.high >= context:
        raise ConfigError(f"--output-tokens {out} can reach {out.high:,} tokens: more than "
                          f"{c.model}'s context of {context:,}"
                          + _longer_context(cls, out.high + 1, "--output-tokens"))
    sched = scheduler_config(c, context)
    if c.prompt_tokens is None:
        if c.kv_tokens is not None and out.high + 1 > sched.kv_tokens:
            raise ConfigError(f"--kv-tokens {sched.kv_tokens:,} cannot hold one sequence of "
                              f"{out.high:,} output tokens")
        return
    prompt = c.prompt_tokens
    # a shared prefix comes before each prompt: its tokens count towards the prompt's
    longest = prompt.high + (shared_prefix_of(c.shared_prefix)[1] if c.shared_prefix else 0)
    given = f"--prompt-tokens {prompt}" + (f" after --shared-prefix {c.shared_prefix}"
                                           if c.shared_prefix else "")
    if c.turns > 1:  # the last turn carries every earlier message and reply
        longest = c.turns * prompt.high + (c.turns - 1) * out.high
        given += f" over --turns {c.turns} (the last turn up to {longest:,} prompt tokens)"
    why = refuses(longest, out.high, sched, context)
    if why is not None:  # the scheduler's own rule: such a request could never be run
        raise ConfigError(f"{given} with --output-tokens {out} on {c.model}: {why}"
                          + (_longer_context(cls, longest + out.high,
                                             "--prompt-tokens and --output-tokens")
                             if longest + out.high > context else ""))


def _longer_context(cls: Any, need: int, lengths: str) -> str:
    """The fix of a sequence longer than the model's context: a longer context where the
    pipeline takes one as a model-arg (``max_context``), within its bound; else shorter
    lengths."""
    arg = next((a for a in getattr(cls, "model_args", ()) if a.name == "max_context"), None)
    if arg is not None and (arg.high is None or need <= arg.high):
        return (f" — give it a longer context (--model-arg max_context={need}), or shorter "
                f"{lengths}")
    return f" — give shorter {lengths}"


def target_generation_checked(c: RunConfig, length_given: bool) -> None:
    """A generation from a --target (someone else's OpenAI-compatible server): no one-shot
    settings, the tokenizer loads, the default length; named after the served model until the
    probe finds the server's own name."""
    base = RunConfig()
    one_shot = one_shot_flags(
        c, ("--pipeline", c.pipeline is not None),
        ("--method", c.http_method != base.http_method),
        ("--content-type", c.content_type != base.content_type),
        ("--health-url", c.health_url is not None),
        ("--body-template", c.body_template is not None))
    if one_shot:
        raise ConfigError(f"{', '.join(one_shot)}: not for a generation from a --target "
                          "(its server is yours; its inputs are --prompts)")
    if c.model not in (base.model, TARGET_MODEL, c.served_model):
        raise ConfigError(f"--model {c.model}: a generation from a --target asks its server "
                          f"for a model by --served-model {c.model} (--model names our "
                          "pipelines)")
    if not length_given:
        c.requests = DEFAULT_GEN_REQUESTS
    if c.tokenizer is not None and c.tokenizer != "server":  # the server's: probed later
        from latency.pipelines.token_counter import TokenCounter

        TokenCounter(c.tokenizer)  # ConfigError in one line when it does not load
        c.tokenizer = str(Path(c.tokenizer).expanduser().resolve())
    c.model = c.served_model or TARGET_MODEL


def generative_run(config: RunConfig) -> bool:
    """Whether a run of ``config`` measures a generation (``run``'s choice and the run
    manager's): a generation flag is given, or the pipeline is a generative sample (a
    ``--pipeline`` of your own is known generative once imported: without a generation flag
    the run process says so, in one line)."""
    if config.generation_flags():
        return True
    if config.pipeline is not None:
        return False
    from latency.pipelines.registry import SAMPLES, source

    if config.model not in SAMPLES:
        return False
    cls = source(config.model).cls
    return cls is not None and is_generative(cls)
