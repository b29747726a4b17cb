"""One source for the flags: every RunConfig field says how people see it (flag, help, the
commands that take it), and every command that takes it agrees — the same name, type,
default and help in ``run``, ``ab``, ``serve`` and ``export``."""
import contextlib
import dataclasses
import io
import re
from dataclasses import replace

import pytest

from latency.cli import ab as ab_cli
from latency.cli import run as run_cli
from latency.cli.main import build_parser, main
from latency.core.config import RunConfig
from latency.core.flags import FLAG, Flag

COMMANDS = ("run", "ab", "serve", "export")
#: the only defaults a command may have of its own: an A/B block is a short run
OWN_DEFAULTS = {("ab", "duration_s"): 3.0, ("ab", "warmup"): 10}


def help_text(command: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """``python -m latency COMMAND --help``, one line a flag (no wrapping), spaces collapsed."""
    monkeypatch.setenv("COLUMNS", "100000")
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as stop:
        main([command, "--help"])
    assert stop.value.code == 0
    return " ".join(out.getvalue().split())


def flag_of(name: str) -> Flag:
    return next(f for f in dataclasses.fields(RunConfig) if f.name == name).metadata[FLAG]


def test_every_runconfig_field_has_its_flag_metadata():
    names = set()
    for f in dataclasses.fields(RunConfig):
        meta = f.metadata.get(FLAG)
        assert isinstance(meta, Flag), f"RunConfig.{f.name} has no Flag metadata"
        assert meta.name.startswith("--") and meta.name not in names, f.name
        names.add(meta.name)
        assert len(meta.help) > 15 and meta.help.strip() == meta.help, f.name
        assert set(meta.commands) <= set(COMMANDS), f.name
        assert meta.group, f"RunConfig.{f.name} names no help section"
        for command in meta.defaults:
            assert (command, f.name) in OWN_DEFAULTS, f"{command} --{f.name}: own default"


@pytest.mark.parametrize("command", COMMANDS)
def test_help_of_every_command_is_the_fields_help_and_default(command, monkeypatch):
    text = help_text(command, monkeypatch)
    taken = [f for f in dataclasses.fields(RunConfig) if command in f.metadata[FLAG].commands]
    assert taken, command
    defaults = RunConfig()
    for f in taken:
        meta = f.metadata[FLAG]
        assert meta.name in text, f"{command} has no {meta.name}"
        default = OWN_DEFAULTS.get((command, f.name), getattr(defaults, f.name))
        if meta.unset or default is None:
            said = f" (default: {meta.default_text})" if meta.default_text else ""
        elif isinstance(default, (list, dict)):
            said = ""
        else:
            said = f" (default: {default})"
        assert " ".join(meta.help.split()) + said in text, f"{command} {meta.name}"


def test_model_defaults_to_synthetic_in_every_command(monkeypatch):
    """``run`` said synthetic, ``ab`` and ``export`` image-cnn; RunConfig, the Python API and
    the dashboard say synthetic."""
    for command in COMMANDS:
        assert re.search(r"--model MODEL .*?\(default: synthetic\)",
                         help_text(command, monkeypatch)), command


def test_run_with_no_flags_is_runconfigs_defaults():
    a = build_parser().parse_args(["run"])
    assert run_cli.config_from_args(a).checked() == RunConfig().checked()


def test_ab_with_no_flags_is_runconfigs_defaults_but_its_short_blocks():
    from latency.execution.validate import validated

    a = build_parser().parse_args(["ab", "--b-replicas", "2"])
    plan = ab_cli.plan_from_args(a)
    assert plan.baseline == validated(replace(RunConfig(), duration_s=3.0, warmup=10))
    assert plan.variant == replace(plan.baseline, replicas=2)


def test_shared_flags_parse_alike_in_run_and_ab():
    """The same flags give the same RunConfig fields (``ab`` took --max-batch-delay-ms as a
    bare float and --optimize as a string)."""
    flags = ["--model", "tabular-mlp", "--batch-size", "4", "--max-batch-delay-ms", "2.5",
             "--replicas", "2", "--threads", "1", "--preprocess-workers", "3",
             "--concurrency", "5", "--duration", "1", "--warmup", "7", "--seed", "9",
             "--optimize", "int8, compile", "--pre", "naive"]
    run = run_cli.config_from_args(build_parser().parse_args(["run", *flags]))
    a = build_parser().parse_args(["ab", *flags, "--b-replicas", "1"])
    base = ab_cli.plan_from_args(a).baseline
    for name in ("model", "batch_size", "max_batch_delay_ms", "replicas", "threads",
                 "preprocess_workers", "concurrency", "duration_s", "warmup", "seed", "pre"):
        assert getattr(base, name) == getattr(run, name), name
    assert run.optimize == ["int8", "compile"] == base.optimize


@pytest.mark.parametrize("command", ["run", "ab", "serve"])
def test_a_bad_number_is_the_same_one_line_error_everywhere(command):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main([command, "--max-batch-delay-ms", "soon"])
    lines = err.getvalue().strip().splitlines()
    assert code == 2 and len(lines) == 1
    assert "--max-batch-delay-ms" in lines[0] and "not a number: 'soon'" in lines[0]


#: the simulator's settings that are the API's alone (no flag): the transient dropped, the
#: bursty period, the unstable guard, and a recording's arrival times (``--from-run`` brings them)
API_ONLY = {"warmup_fraction", "burst_on_s", "allow_unstable", "arrival_times_ms"}
#: simulate's own flags, which are not a setting of the simulated system
SIMULATE_OWN = {"--from-run", "--db", "--json", "--force", "-h", "--help"}
#: simulate's flags that mean what a RunConfig field means: one help text for both
SAME_AS_RUN = ("replicas", "batch_size", "max_batch_delay_ms", "preprocess_workers", "seed")


def test_every_simulated_setting_that_is_a_flag_has_its_metadata(monkeypatch):
    """simulate's flags are made from SimConfig's, ServiceModel's and GenSimSettings' fields,
    as run's are from RunConfig's: each flag but the command's own is a field's, ``--help``
    says its help, and a generation setting named as a run flag means what that flag means."""
    from latency.core.config import field_help
    from latency.core.flags import flags_of
    from latency.simulation.config import GenSimSettings, SimConfig, setting_help
    from latency.simulation.service import ServiceModel

    gen = flags_of(GenSimSettings)
    declared = {**flags_of(SimConfig), **flags_of(ServiceModel), **gen}
    for name, f in gen.items():
        if name not in ("decode_scale", "prefill_scale"):
            assert f.help == field_help(name), name
    assert set(flags_of(SimConfig)) == {f.name for f in dataclasses.fields(SimConfig)} - API_ONLY
    assert set(flags_of(ServiceModel)) == {"forward_ms", "dist", "cv"}
    sub = next(a for a in build_parser()._actions if hasattr(a, "choices") and a.choices
               and "simulate" in a.choices).choices["simulate"]
    parsed = {o for a in sub._actions for o in a.option_strings}
    assert parsed - SIMULATE_OWN == {f.name for f in declared.values()}
    shown = help_text("simulate", monkeypatch)
    for name, f in declared.items():
        assert f"{f.name} " in shown and " ".join(f.help.split()) in shown, name
        assert setting_help(name) == f.help
    for name in SAME_AS_RUN:
        assert " ".join(field_help(name).split()) in " ".join(declared[name].help.split())
