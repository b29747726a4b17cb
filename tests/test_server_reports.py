"""Reading a third-party server's own account of a streamed request, and counting a reply's
tokens per chunk with the server's tokenizer — on the shapes the servers' own documentation
and sources give (llama.cpp's ``timings``, vLLM's per-request ``metrics``, TGI's headers),
and the target URL forms ``--target`` accepts."""
from __future__ import annotations

from pathlib import Path

import pytest

from latency.core.errors import ConfigError
from latency.core.gen_reports import (
    MISSING,
    SOURCE_LLAMACPP,
    SOURCE_TGI,
    SOURCE_VLLM,
    SPLIT,
    SPLIT_PARTS,
    empty_reports,
    trace_id_hex,
)
from latency.execution.openai_probe import split_target
from latency.loadgen.server_reports import ReportError, from_llamacpp, from_tgi, from_vllm
from latency.pipelines.token_counter import TokenCounter

WEIGHTS = Path(__file__).resolve().parents[1] / "sample_models" / "weights"

#: llama.cpp's final chunk of an OpenAI-compatible stream carries ``timings`` (its
#: result_timings::to_json: cache_n, prompt_n, prompt_ms, …, predicted_n, predicted_ms, …)
LLAMACPP_TIMINGS = {"cache_n": 12, "prompt_n": 88, "prompt_ms": 41.5,
                    "prompt_per_token_ms": 0.4716, "prompt_per_second": 2120.5,
                    "predicted_n": 64, "predicted_ms": 812.25,
                    "predicted_per_token_ms": 12.69, "predicted_per_second": 78.8}
#: vLLM's per-request metrics (docs/features/per_request_metrics.md)
VLLM_METRICS = {"time_to_first_token_ms": 85.2, "generation_time_ms": 1240.5,
                "queue_time_ms": 12.3, "mean_itl_ms": 9.1, "tokens_per_second": 103.2}


def test_llamacpp_timings_give_prefill_decode_and_the_cache():
    r = from_llamacpp(LLAMACPP_TIMINGS)
    assert r is not None and r.source == SOURCE_LLAMACPP
    assert r.prefill_ns == 41_500_000 and r.decode_ns == 812_250_000
    assert (r.prompt_tokens, r.output_tokens, r.cached_tokens) == (88, 64, 12)
    assert r.queue_ns == MISSING  # llama.cpp does not say: the split derives it


def test_vllm_metrics_give_queue_prefill_and_decode():
    r = from_vllm(VLLM_METRICS)
    assert r is not None and r.source == SOURCE_VLLM
    assert (r.queue_ns, r.prefill_ns, r.decode_ns) == (12_300_000, 85_200_000, 1_240_500_000)


def test_tgi_headers_split_inference_with_the_time_per_token():
    r = from_tgi({b"x-queue-time": b"7", b"x-inference-time": b"700",
                  b"x-time-per-token": b"10", b"x-generated-tokens": b"51",
                  b"x-prompt-tokens": b"30"})
    assert r is not None and r.source == SOURCE_TGI
    assert r.queue_ns == 7_000_000 and r.inference_ns == 700_000_000
    assert r.decode_ns == 500_000_000 and r.prefill_ns == 200_000_000  # 10 ms × 50 gaps
    assert (r.prompt_tokens, r.output_tokens) == (30, 51)
    assert from_tgi({b"content-type": b"text/event-stream"}) is None


@pytest.mark.parametrize("bad", [
    {**LLAMACPP_TIMINGS, "prompt_ms": -1.0},
    {**LLAMACPP_TIMINGS, "predicted_ms": float("nan")},
    {**LLAMACPP_TIMINGS, "predicted_n": 2.5},
    {**LLAMACPP_TIMINGS, "prompt_ms": "41"},
    "timings",
])
def test_an_unusable_llamacpp_report_is_refused_whole(bad):
    with pytest.raises(ReportError):
        from_llamacpp(bad)


def test_an_unusable_vllm_or_tgi_report_is_refused_whole():
    with pytest.raises(ReportError):
        from_vllm({**VLLM_METRICS, "queue_time_ms": None})
    with pytest.raises(ReportError):
        from_tgi({b"x-queue-time": b"soon"})
    with pytest.raises(ReportError):  # more decode than inference: not believed
        from_tgi({b"x-queue-time": b"1", b"x-inference-time": b"10",
                  b"x-time-per-token": b"5", b"x-generated-tokens": b"9"})
    assert from_vllm(None) is None and from_llamacpp(None) is None


def test_every_source_says_where_each_part_comes_from():
    for source, parts in SPLIT.items():
        assert tuple(parts) == SPLIT_PARTS, source
        assert set(parts.values()) <= {"reported", "derived", "measured",
                                       "derived from the server's figures"}


def test_empty_reports_say_nothing_and_trace_ids_print_as_32_hex_digits():
    rows = empty_reports(3)
    assert (rows["source"] == 0).all() and (rows["queue_ns"] == MISSING).all()
    assert trace_id_hex(0, 0) == ""
    assert trace_id_hex(0xABC, 1) == "0000000000000abc0000000000000001"


@pytest.mark.parametrize("url,api,base,want", [
    ("http://h:8000/v1", None, "http://h:8000/v1", "chat"),
    ("http://h:8000", "completions", "http://h:8000/v1", "completions"),
    ("http://h:8000/", None, "http://h:8000/v1", "chat"),
    ("https://h/v1/chat/completions", None, "https://h/v1", "chat"),
    ("http://h:8000/v1/completions", None, "http://h:8000/v1", "completions"),
    ("http://h/proxy/v1/", "chat", "http://h/proxy/v1", "chat"),
])
def test_a_target_url_names_its_base_and_api(url, api, base, want):
    assert split_target(url, api) == (base, want)


def test_a_route_and_a_different_api_is_one_line():
    with pytest.raises(ConfigError, match="names the completions route but --api is chat"):
        split_target("http://h/v1/completions", "chat")


def test_tokens_are_given_to_the_chunk_that_delivered_their_first_character():
    counter = TokenCounter(WEIGHTS / "tiny-lm.tokenizer.json")
    text = "The weather in the north will be cold and windy, with rain by the evening."
    whole = counter.count(text)
    one = counter.per_chunk([text])
    assert one == [whole]
    # split the reply into chunks of two and three characters: the counts add up, and every
    # chunk that starts a token gets it
    chunks = [text[i:i + 3] for i in range(0, len(text), 3)]
    per = counter.per_chunk(chunks)
    assert sum(per) == whole and len(per) == len(chunks)
    assert per.count(0) > 0  # some chunks only continue a token
    assert counter.per_chunk(["", "", ""]) == [0, 0, 0]
    assert counter.text(counter.ids(text)).strip() == text


def test_a_tokenizer_that_does_not_load_is_one_line(tmp_path):
    with pytest.raises(ConfigError, match="no tokenizer.json there"):
        TokenCounter(tmp_path)
    (tmp_path / "tokenizer.json").write_text("{not json")
    with pytest.raises(ConfigError, match="does not load"):
        TokenCounter(tmp_path)


def test_a_tokenizer_saved_without_its_tokenizer_json_is_read_through_transformers(tmp_path):
    """A BPE's vocab.json and merges.txt with its tokenizer_config.json (a tokenizer saved
    "slow", as many model repositories ship it): transformers converts it to the same fast
    tokenizer, whose offsets give each token its chunk."""
    from tests.conftest import require_extra

    require_extra("transformers", "a tokenizer without its tokenizer.json is read through "
                  "transformers (pip install -r requirements-hf.txt)")
    from tokenizers import ByteLevelBPETokenizer

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(["the weather today is sunny and warm"] * 40, vocab_size=280,
                            min_frequency=1)
    bpe.save_model(str(tmp_path))
    (tmp_path / "tokenizer_config.json").write_text('{"tokenizer_class": "GPT2Tokenizer"}')
    counter = TokenCounter(tmp_path)
    text = "the weather today is warm"
    assert counter.ids(text) == bpe.encode(text).ids
    assert sum(counter.per_chunk(["the wea", "ther today", " is warm"])) == counter.count(text)
    assert "transformers" in counter.source
    (tmp_path / "tokenizer_config.json").write_text('{"tokenizer_class": "NoSuchTokenizer"}')
    with pytest.raises(ConfigError, match="transformers could not load it"):
        TokenCounter(tmp_path)


# ---- the split of each request between network, queue, prefill, decode and the rest ----------
def _rows(ttft_ms: list[float], e2e_ms: list[float]):
    import numpy as np

    from latency.core.gen_records import GEN_DTYPE

    rows = np.zeros(len(ttft_ms), dtype=GEN_DTYPE)
    rows["t_sent"] = 1_000_000_000
    rows["t_first_deliv"] = rows["t_sent"] + (np.array(ttft_ms) * 1e6).astype(np.int64)
    rows["t_done"] = rows["t_sent"] + (np.array(e2e_ms) * 1e6).astype(np.int64)
    return rows


def test_the_split_adds_up_to_each_requests_ttft_and_e2e_and_says_where_parts_come_from():
    from latency.analysis.server_split import TTFT_SPLIT, split

    rows = _rows([100.0, 60.0, 50.0, 10.0], [900.0, 500.0, 450.0, 40.0])
    reps = empty_reports(4)
    reps["source"] = [SOURCE_LLAMACPP, SOURCE_VLLM, SOURCE_VLLM, 0]
    reps["prefill_ns"] = [40e6, 30e6, 35e6, MISSING]
    reps["decode_ns"] = [700e6, 400e6, 390e6, MISSING]
    reps["queue_ns"][1:3] = [20e6, 10e6]
    s = split(rows, reps, rtt_floor_ns=2_000_000)
    assert s.n == 2 + 1 and s.unreported == 1 and s.inconsistent == 0
    total = sum(s.parts[p] for p in SPLIT_PARTS)
    assert (total == s.e2e_ns).all()  # exactly, to the nanosecond
    assert (sum(s.parts[p] for p in TTFT_SPLIT) == s.ttft_ns).all()
    # llama.cpp: the network is the client's floor, the queue what is left of TTFT
    assert s.parts["network"][0] == 2_000_000 and s.parts["queue"][0] == 58_000_000
    # vLLM: queue and prefill reported, network (+ frontend) what is left
    assert s.parts["network"][1] == 10_000_000 and s.parts["queue"][1] == 20_000_000
    assert s.provenance["llama.cpp timings"]["queue"] == "derived"
    assert s.provenance["vLLM per-request metrics"]["queue"] == "reported"
    assert s.sources == {"llama.cpp timings": 1, "vLLM per-request metrics": 2}
    shares = s.tail_shares()
    assert abs(sum(shares.values()) - 1.0) < 1e-9 and shares["queue"] == pytest.approx(0.58)


def test_a_report_longer_than_the_client_saw_is_inconsistent_and_left_out():
    from latency.analysis.server_split import split

    rows = _rows([50.0, 50.0], [100.0, 100.0])
    reps = empty_reports(2)
    reps["source"] = SOURCE_VLLM
    reps["queue_ns"] = [10e6, 40e6]
    reps["prefill_ns"] = [20e6, 30e6]  # the second: 70 ms of server time in a 50 ms TTFT
    reps["decode_ns"] = [40e6, 40e6]
    s = split(rows, reps, rtt_floor_ns=0)
    assert s.n == 1 and s.inconsistent == 1 and list(s.rows) == [0]
    assert all((v >= 0).all() for v in s.parts.values())


def test_a_tgi_report_without_its_time_per_token_is_incomplete_not_inconsistent():
    from latency.analysis.server_split import split
    from latency.core.gen_reports import SOURCE_TGI

    whole = from_tgi({b"x-queue-time": b"5", b"x-inference-time": b"60",
                      b"x-time-per-token": b"10", b"x-generated-tokens": b"5"})
    partial = from_tgi({b"x-queue-time": b"5", b"x-inference-time": b"60"})
    assert whole is not None and partial is not None and partial.decode_ns == MISSING
    rows = _rows([50.0, 50.0], [100.0, 100.0])
    reps = empty_reports(2)
    for i, r in enumerate((whole, partial)):
        reps["source"][i] = SOURCE_TGI
        for f in ("queue_ns", "prefill_ns", "decode_ns", "inference_ns"):
            reps[f][i] = getattr(r, f)
    s = split(rows, reps, rtt_floor_ns=0)
    assert s.n == 1 and s.incomplete == 1 and s.inconsistent == 0
    # its prefill and decode come from its own headers, and say so
    assert s.provenance["TGI headers"]["prefill"] == "derived from the server's figures"
    assert s.parts["decode"][0] == 40_000_000 and s.parts["prefill"][0] == 20_000_000


def test_a_report_longer_than_the_client_saw_by_less_than_it_resolves_is_clamped_and_counted():
    """llama.cpp's predicted_ms is stamped where tokens are made, the client's E2E − TTFT
    where they arrive: 0.4 ms more in the report is noise within a 1 ms resolution (clamped,
    counted, the parts still sum exactly); 3 ms more is not (left out, counted)."""
    from latency.analysis.server_split import TTFT_SPLIT, split

    rows = _rows([30.0, 30.0, 30.0, 30.0], [230.0, 230.0, 230.0, 230.0])
    reps = empty_reports(4)
    reps["source"] = SOURCE_LLAMACPP
    reps["prefill_ns"] = [10e6, 10e6, 29.7e6, 10e6]  # the third: queue −0.3 ms after the floor
    reps["decode_ns"] = [199e6, 200.4e6, 199e6, 203e6]  # the second: other −0.4, the last −3
    s = split(rows, reps, rtt_floor_ns=600_000, tolerance_ns=1_000_000)
    assert s.n == 3 and list(s.rows) == [0, 1, 2]
    assert s.clamped == 2 and s.inconsistent == 1 and s.floor_misfit == 0
    assert all((v >= 0).all() for v in s.parts.values())
    assert (sum(s.parts[p] for p in SPLIT_PARTS) == s.e2e_ns).all()
    assert (sum(s.parts[p] for p in TTFT_SPLIT) == s.ttft_ns).all()
    # the deficit is taken from the reported part beside it: decode, then prefill
    assert s.parts["other"][1] == 0 and s.parts["decode"][1] == 200_000_000
    assert s.parts["queue"][2] == 0 and s.parts["prefill"][2] == 29_400_000
    # without a tolerance, all three disagreeing requests are left out, as before
    assert split(rows, reps, rtt_floor_ns=600_000).inconsistent == 3


def test_a_request_that_fits_only_without_the_network_floor_blames_the_floor():
    """A server slow to answer small requests (no TCP_NODELAY) makes the probe's floor 43 ms:
    the report fits the client's TTFT, the floor does not — counted as the floor's."""
    from latency.analysis.server_split import split

    rows = _rows([40.0, 40.0], [100.0, 100.0])
    reps = empty_reports(2)
    reps["source"] = SOURCE_LLAMACPP
    reps["prefill_ns"] = [30e6, 45e6]  # the second exceeds TTFT itself: the report's fault
    reps["decode_ns"] = [50e6, 50e6]
    s = split(rows, reps, rtt_floor_ns=43_000_000, tolerance_ns=500_000)
    assert s.n == 0 and s.inconsistent == 2 and s.floor_misfit == 1
