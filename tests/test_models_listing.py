"""``python -m latency models``: one line per pipeline, as the README shows it."""
import contextlib
import io

from latency.cli.main import main
from latency.pipelines.registry import sources


def test_models_is_one_line_per_pipeline_with_its_model_args_ready_to_paste():
    """synthetic and model-file took a line per argument (a screen each); every pipeline is
    one line: its name, its description, and its --model-arg flags with their defaults."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["models"]) == 0
    lines = out.getvalue().splitlines()
    names = [name for name, _, _ in sources()]
    assert [line.split()[0] for line in lines] == names
    synthetic = next(line for line in lines if line.startswith("synthetic "))
    assert "--model-arg forward_ms=5.0" in synthetic and "--model-arg dist=constant" in synthetic
    assert all(not line.startswith(" ") for line in lines)
