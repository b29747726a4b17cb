"""Your own server: a plain ``POST /predict`` JSON server (not Open Inference Protocol) as a
target, decomposed when it sends ``Server-Timing``, and said plainly when it does not."""
import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from latency.core.config import RunConfig
from latency.core.errors import ConfigError
from latency.execution.engine import execute
from latency.execution.validate import validated


class _Predict(BaseHTTPRequestHandler):
    """POST /predict {"text": ...} → {"label": ...}, holding 2 ms of "forward"; GET /healthz."""

    timing = True
    seen: list = []

    def log_message(self, *args):  # quiet
        pass

    def do_GET(self):
        self.send_response(200 if self.path == "/healthz" else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        t0 = time.perf_counter()
        doc = json.loads(body)
        if self.path != "/predict" or "text" not in doc:
            self.send_response(422)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        type(self).seen.append(doc)
        time.sleep(0.002)
        out = json.dumps({"label": "positive"}).encode()
        fwd = (time.perf_counter() - t0) * 1000
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        if type(self).timing:
            self.send_header("Server-Timing", f"queue;dur=0, forward;dur={fwd:.3f}")
        self.end_headers()
        self.wfile.write(out)


@pytest.fixture()
def predict_server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Predict)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    _Predict.timing = True


def _inputs(tmp_path):
    path = tmp_path / "texts.txt"
    path.write_text("great kettle\nbroken lamp\nfine chair\n")
    return str(path)


def test_a_plain_http_server_is_profiled_and_decomposed_by_server_timing(predict_server,
                                                                           tmp_path):
    _Predict.seen = []
    r = execute(RunConfig(target=f"{predict_server}/predict", target_protocol="http",
                          inputs=_inputs(tmp_path), body_template='{"text": {input}}',
                          health_url=f"{predict_server}/healthz", concurrency=2,
                          requests=60, warmup=3))
    assert r.status == "completed" and r.summary.errors == 0, r.summary.error_messages
    assert r.summary.transport.decomposition == "server-timing"
    assert r.summary.components_ms["forward"].p50 == pytest.approx(2.1, abs=1.0)
    assert {"text": "great kettle"} in _Predict.seen  # the template filled with JSON
    assert r.environment["transport"]["protocol"] == "plain HTTP"


def test_without_server_timing_the_verdict_says_the_split_is_unavailable(predict_server,
                                                                           tmp_path):
    _Predict.timing = False
    r = execute(RunConfig(target=f"{predict_server}/predict", target_protocol="http",
                          inputs=_inputs(tmp_path), body_template='{"text": {input}}',
                          requests=40, warmup=2))
    assert r.status == "completed" and r.summary.transport.decomposition == "client-only"
    v = str(r.summary.verdict)
    assert v.startswith("the split is unavailable") and "Server-Timing: queue;dur=" in v
    assert "shrink payloads" not in v


def test_a_failing_status_is_an_error_and_the_run_goes_on(predict_server, tmp_path):
    bodies = tmp_path / "bodies.txt"
    bodies.write_text('{"text": "ok"}\n{"nope": 1}\n')
    r = execute(RunConfig(target=f"{predict_server}/predict", target_protocol="http",
                          bodies=str(bodies), requests=40, warmup=0))
    assert r.summary.errors == 20 and r.summary.successful == 20
    assert any(m.startswith("HTTP 422") for m in r.summary.error_messages)


def test_plain_targets_check_their_settings_in_one_line(predict_server, tmp_path):
    with pytest.raises(ConfigError, match="needs its request bodies"):
        validated(RunConfig(target=predict_server, target_protocol="http"))
    with pytest.raises(ConfigError, match=r"\{input\}"):
        validated(RunConfig(target=predict_server, target_protocol="http",
                            inputs=_inputs(tmp_path), body_template="{}"))
    out = subprocess.run([sys.executable, "-m", "latency", "run", "--target",
                          "http://127.0.0.1:9/predict", "--target-protocol", "http",
                          "--inputs", _inputs(tmp_path), "--requests", "5", "--no-save"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "unreachable" in out.stdout  # the run fails, says why


def test_an_oip_target_refusing_a_plain_server_says_what_to_do(predict_server):
    r = execute(RunConfig(target=predict_server, model="synthetic", requests=5))
    assert r.status == "failed" and "/v2/health/ready" in r.failure
    assert "--target-protocol http" in r.failure
