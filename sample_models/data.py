"""Deterministic raw-input generators for the three real sample pipelines.

Why generated data and not a downloaded data set: the project must build, train and test with no
network, and the profiler needs raw inputs that look like what a client sends (JPEG bytes of
varied sizes, free text of varied length, JSON records), not ready-made tensors.

Every sample ``i`` of a ``(split, seed)`` stream is drawn from its own generator seeded with
``(split, seed, i)``. So streams are reproducible, the ``train``/``test``/``heldout`` splits never
share a sample, and sample ``i`` does not depend on how many were asked for (so the training
script can generate a stream in parallel chunks with ``start``).
The pipelines' ``sample_inputs`` draw from ``heldout``; ``train.py`` uses ``train`` and ``test``.
"""
from __future__ import annotations

import io
import json
import math
import re
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
from PIL import Image, ImageDraw

SPLITS = {"train": 1, "test": 2, "heldout": 3}
T = TypeVar("T")


def _stream(kind: int, n: int, seed: int, split: str, start: int,
            make: Callable[[np.random.Generator], T]) -> list[T]:
    """Samples ``start .. start+n-1`` from ``make``, each from its own rng (see module doc)."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {sorted(SPLITS)}, not {split!r}")
    if seed < 0 or start < 0:
        raise ValueError("seed and start must be >= 0")
    return [make(np.random.default_rng([kind, SPLITS[split], seed, i]))
            for i in range(start, start + n)]


# ---- shapes (image-cnn) ----------------------------------------------------------------------
SHAPES = ("circle", "square", "triangle", "star", "cross", "ring", "ellipse", "diamond",
          "hexagon", "arrow")
#: the pipeline resizes the shorter side to this and centre-crops ``CROP``; shapes are placed
#: inside that central square so the crop never cuts them.
RESIZE, CROP = 72, 64


def _regular(k: int, start_deg: float = 90.0) -> np.ndarray:
    a = np.deg2rad(start_deg) + 2 * np.pi * np.arange(k) / k
    return np.stack([np.cos(a), np.sin(a)], 1)


def _ellipse(a: float, b: float, k: int = 72) -> np.ndarray:
    t = 2 * np.pi * np.arange(k) / k
    return np.stack([a * np.cos(t), b * np.sin(t)], 1)


def _outline(shape: str, rng: np.random.Generator) -> list[np.ndarray]:
    """Polygons on a unit scale (circumradius ~1): the first is filled, the others are holes."""
    if shape == "circle":
        return [_ellipse(1, 1)]
    if shape == "ring":
        return [_ellipse(1, 1), _ellipse(*(2 * [rng.uniform(0.5, 0.68)]))]
    if shape == "ellipse":
        return [_ellipse(1, rng.uniform(0.42, 0.62))]
    if shape == "square":
        return [_regular(4, 45)]
    if shape == "diamond":  # a rhombus, never a square, so it is not a rotated "square"
        b = rng.uniform(0.42, 0.62)
        return [np.array([[1, 0], [0, b], [-1, 0], [0, -b]], float)]
    if shape == "triangle":
        return [_regular(3)]
    if shape == "hexagon":
        return [_regular(6)]
    if shape == "star":
        pts = _regular(10)
        pts[1::2] *= rng.uniform(0.38, 0.48)
        return [pts]
    if shape == "cross":
        w = rng.uniform(0.26, 0.34)
        return [np.array([[w, w], [w, 1], [-w, 1], [-w, w], [-1, w], [-1, -w], [-w, -w],
                          [-w, -1], [w, -1], [w, -w], [1, -w], [1, w]], float)]
    if shape == "arrow":
        s, h = rng.uniform(0.18, 0.26), rng.uniform(0.5, 0.62)
        return [np.array([[-1, -s], [0.1, -s], [0.1, -h], [1, 0], [0.1, h], [0.1, s],
                          [-1, s]], float)]
    raise ValueError(f"unknown shape {shape!r}")


def _shape_jpeg(rng: np.random.Generator) -> tuple[bytes, str]:
    """One photo-like JPEG: random size and aspect, cluttered noisy background, one shape."""
    label = SHAPES[rng.integers(len(SHAPES))]
    w = int(rng.integers(96, 481))
    h = int(np.clip(w * math.exp(rng.uniform(-0.6, 0.6)), 96, 480))
    short = min(w, h)

    # background: a base colour, a linear gradient in a random direction, faint lines, noise
    # (float32 and broadcasting throughout: generating the training set is the slow part)
    f32 = np.float32
    ang = rng.uniform(0, 2 * np.pi)
    ramp = (math.cos(ang) * np.arange(w, dtype=f32) / w
            + math.sin(ang) * np.arange(h, dtype=f32)[:, None] / h)[..., None]
    img = rng.uniform(0, 255, 3).astype(f32) + ramp * rng.uniform(-60, 60, 3).astype(f32)
    clutter = Image.new("L", (w, h))
    draw = ImageDraw.Draw(clutter)
    for _ in range(int(rng.integers(0, 4))):
        draw.line([tuple(rng.uniform(0, [w, h])), tuple(rng.uniform(0, [w, h]))],
                  fill=int(rng.integers(80, 256)), width=int(rng.integers(1, 3)))
    img += np.asarray(clutter, f32)[..., None] * (rng.uniform(-50, 50, 3) / 255).astype(f32)

    # the shape: size relative to the visible crop, placed fully inside it, any rotation
    visible = short * CROP / RESIZE
    r = short * rng.uniform(0.14, 0.33)
    cx, cy = np.array([w, h]) / 2 + rng.uniform(-1, 1, 2) * (visible / 2 - 1.05 * r)
    theta = rng.uniform(0, 2 * np.pi)
    rot = np.array([[math.cos(theta), -math.sin(theta)], [math.sin(theta), math.cos(theta)]])
    mask_img = Image.new("L", (w, h))
    draw = ImageDraw.Draw(mask_img)
    for k, poly in enumerate(_outline(label, rng)):
        pts = poly @ rot.T * r + [cx, cy]
        draw.polygon([tuple(p) for p in pts], fill=255 if k == 0 else 0)
    mask = np.asarray(mask_img, f32)[..., None] / 255

    colour = rng.uniform(0, 255, 3)
    bg_mean = img[::8, ::8].mean((0, 1))
    while np.abs(colour - bg_mean).sum() < 150:  # keep the shape visible
        colour = rng.uniform(0, 255, 3)
    img += mask * (colour.astype(f32) - img)
    img += rng.standard_normal(img.shape, dtype=f32) * f32(rng.uniform(3, 18))

    buf = io.BytesIO()
    Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(
        buf, "JPEG", quality=int(rng.integers(75, 96)))
    return buf.getvalue(), label


def shape_samples(n: int, seed: int, split: str = "heldout",
                  start: int = 0) -> list[tuple[bytes, str]]:
    """``n`` (JPEG bytes, shape label) pairs: 96-480 px, any aspect, noisy backgrounds."""
    return _stream(1, n, seed, split, start, _shape_jpeg)


# ---- texts (text-transformer) ----------------------------------------------------------------
TOPICS = ("sports", "finance", "weather", "technology", "food", "travel")

_SHARED = {
    "name": ["Anna", "Ben", "Carla", "David", "Elena", "Farid", "Grace", "Hugo", "Ines", "Jonas",
             "Kim", "Leo", "Maya", "Nora", "Omar", "Priya"],
    "city": ["London", "Paris", "Berlin", "Madrid", "Tokyo", "Chicago", "Lisbon", "Oslo", "Rome",
             "Seattle", "Dublin", "Vienna"],
    "day": ["on Monday", "on Tuesday", "on Wednesday", "on Thursday", "on Friday",
            "on Saturday", "on Sunday", "yesterday", "today", "last week", "this morning",
            "tonight"],
    "adj": ["big", "surprising", "strong", "weak", "new", "unusual", "steady", "sharp", "long",
            "quick", "quiet", "busy"],
}

_TOPIC_WORDS: dict[str, dict[str, list[str]]] = {
    "sports": {
        "team": ["United", "the Rovers", "the Tigers", "City", "the Eagles", "the Giants"],
        "event": ["match", "game", "final", "derby", "tournament", "semifinal", "race"],
        "act": ["scored", "defended", "won", "lost", "equalised", "tackled", "sprinted"],
        "thing": ["goal", "penalty", "coach", "striker", "referee", "league", "season", "fans",
                  "stadium", "keeper"],
    },
    "finance": {
        "team": ["the central bank", "investors", "the fund", "shareholders", "the bank",
                 "traders"],
        "event": ["earnings report", "rate decision", "quarterly results", "merger", "IPO",
                  "budget"],
        "act": ["rallied", "fell", "rose", "invested", "borrowed", "traded", "sold"],
        "thing": ["stocks", "bonds", "inflation", "interest rates", "the market", "dividends",
                  "profits", "shares", "currency", "debt"],
    },
    "weather": {
        "team": ["forecasters", "the met office", "meteorologists", "residents",
                 "the weather service", "farmers"],
        "event": ["storm", "heatwave", "cold front", "blizzard", "downpour", "drought", "frost"],
        "act": ["warned", "poured", "froze", "cleared", "swept", "flooded", "cooled"],
        "thing": ["rain", "wind", "snow", "temperatures", "clouds", "humidity", "sunshine",
                  "thunder", "fog", "showers"],
    },
    "technology": {
        "team": ["engineers", "the startup", "developers", "the chipmaker", "researchers",
                 "the software team"],
        "event": ["launch", "update", "release", "outage", "keynote", "security patch"],
        "act": ["released", "shipped", "patched", "hacked", "upgraded", "deployed", "crashed"],
        "thing": ["the app", "the phone", "software", "the laptop", "servers", "the chip",
                  "the network", "battery", "algorithm", "cloud"],
    },
    "food": {
        "team": ["the chef", "the bakery", "the restaurant", "diners", "the kitchen",
                 "food critics"],
        "event": ["dinner", "tasting", "brunch", "menu launch", "food festival", "cook-off"],
        "act": ["cooked", "baked", "roasted", "tasted", "served", "seasoned", "grilled"],
        "thing": ["pasta", "soup", "bread", "dessert", "spices", "the recipe", "cheese",
                  "vegetables", "sauce", "noodles"],
    },
    "travel": {
        "team": ["tourists", "the airline", "travellers", "the hotel", "passengers",
                 "backpackers"],
        "event": ["trip", "flight", "cruise", "holiday", "tour", "road trip", "layover"],
        "act": ["booked", "flew", "visited", "explored", "checked in", "landed", "departed"],
        "thing": ["the beach", "luggage", "passports", "the museum", "the airport", "tickets",
                  "the train", "hostels", "the old town", "souvenirs"],
    },
}

_TOPIC_TEMPLATES = [
    "{team} {act} during the {event} in {city} {day}.",
    "The {event} was {adj}, and {team} {act} again.",
    "{name} said the {thing} {act} after the {event}.",
    "Everyone talked about the {thing} and the {thing2}.",
    "{team} expect the {thing} to matter at the next {event}.",
    "{day}, {name} {act} while {team} watched.",
    "It was a {adj} {event} for {team}.",
    "The {thing} in {city} {act} {day}.",
    "{name} thinks the {thing} will be {adj} this year.",
    "According to {team}, the {thing2} {act} faster than expected.",
    "Nobody expected the {event} to feel so {adj}.",
    "Reports from {city} say the {thing} {act}.",
]

_FILLER = [
    "More details will follow later.", "That is what we heard from {name}.",
    "It is hard to say what happens next.", "Some people were not convinced.",
    "{name} shared the news {day}.", "We will keep you updated.",
    "This story was updated {day}.", "Thanks for reading.", "Many questions remain open.",
    "Opinions were divided, as usual.", "In other news, {name} moved to {city}.",
    "It was {adj}, to say the least.", "Read the full report below.",
]


def _fill(template: str, words: dict[str, list[str]], rng: np.random.Generator) -> str:
    """Fill each ``{slot}`` from the topic's words, else the shared ones (``thing2``: 2nd thing)."""
    def pick(key: str) -> str:
        pool = words.get(key.rstrip("2")) or _SHARED[key]
        return pool[rng.integers(len(pool))]
    text = re.sub(r"\{(\w+)\}", lambda m: pick(m.group(1)), template)
    return re.sub(r"\bthe the\b", "the", text)


def _text(rng: np.random.Generator) -> tuple[str, str]:
    """Topic sentences mixed with filler and the odd other-topic sentence, cut to 3-150 words
    (log-uniform, so short texts are common and some are too ambiguous to get right)."""
    topic = TOPICS[rng.integers(len(TOPICS))]
    target = int(round(math.exp(rng.uniform(math.log(3), math.log(150)))))
    sentences, n_words = [], 0
    while n_words < target:
        u = rng.random()
        if not sentences or u < 0.55:  # the first sentence is always on topic
            words = _TOPIC_WORDS[topic]
            t = _TOPIC_TEMPLATES[rng.integers(len(_TOPIC_TEMPLATES))]
        elif u < 0.88:
            words, t = {}, _FILLER[rng.integers(len(_FILLER))]
        else:  # a distractor sentence from another topic: the label is the majority topic
            words = _TOPIC_WORDS[TOPICS[rng.integers(len(TOPICS))]]
            t = _TOPIC_TEMPLATES[rng.integers(len(_TOPIC_TEMPLATES))]
        s = _fill(t, words, rng)
        sentences.append(s[0].upper() + s[1:])
        n_words += len(s.split())
    words = " ".join(sentences).split()[:target]
    for i in range(len(words)):  # typos and stray tokens, so the vocabulary has unknowns
        if rng.random() < 0.03:
            words[i] = "".join(rng.choice(list("abcdefghijklmnopqrstuvwxyz"),
                                          int(rng.integers(3, 9))))
    return " ".join(words), topic


def text_samples(n: int, seed: int, split: str = "heldout",
                 start: int = 0) -> list[tuple[str, str]]:
    """``n`` (text, topic) pairs of 3-150 words: templated topic sentences, filler and noise."""
    return _stream(2, n, seed, split, start, _text)


# ---- loan records (tabular-mlp) --------------------------------------------------------------
NUMERIC_FIELDS = ("age", "income", "loan_amount", "credit_score", "debt_to_income",
                  "years_employed")
CATEGORICAL_FIELDS = {
    "employment": ("salaried", "self_employed", "contract", "unemployed"),
    "home": ("rent", "own", "mortgage"),
    "purpose": ("car", "home_improvement", "education", "business", "medical",
                "debt_consolidation"),
}
LOAN_LABELS = ("repaid", "default")


def default_logit(r: dict[str, Any]) -> float:
    """The known nonlinear rule behind the label (before noise): log-odds of default."""
    z = -1.6
    z += 2.2 * math.tanh((660 - r["credit_score"]) / 60)
    z += 1.8 * min(r["loan_amount"] / r["income"], 1.5)
    z += 6.0 * max(0.0, r["debt_to_income"] - 0.35)
    z += 0.7 * ((r["age"] - 45) / 15) ** 2 - 0.35
    z -= 0.1 * min(r["years_employed"], 10)
    z += {"salaried": 0.0, "self_employed": 0.3, "contract": 0.5, "unemployed": 1.2}[
        r["employment"]]
    z += {"rent": 0.3, "own": -0.6, "mortgage": 0.0}[r["home"]]
    if r["employment"] == "self_employed" and r["purpose"] == "business":
        z += 0.9
    z += {"medical": 0.4, "debt_consolidation": 0.3, "education": -0.2}.get(r["purpose"], 0.0)
    return z


def _loan(rng: np.random.Generator) -> tuple[str, str]:
    """One applicant as JSON; the label is ``default_logit`` plus logistic noise (so even the
    rule itself scores only ~87%: the noise sets the ceiling, not the model)."""
    employment = str(rng.choice(CATEGORICAL_FIELDS["employment"], p=[0.6, 0.15, 0.15, 0.1]))
    age = int(rng.integers(21, 71))
    income = float(round(rng.lognormal(math.log(52000), 0.45), -2))
    if employment == "unemployed":
        income = float(round(income * 0.3, -2))
    r = {
        "age": age,
        "income": max(income, 6000.0),
        "loan_amount": float(round(rng.lognormal(math.log(14000), 0.7), -2)),
        "credit_score": int(np.clip(rng.normal(680, 70), 300, 850)),
        "debt_to_income": round(float(rng.beta(2, 5) * 0.9), 3),
        "years_employed": 0.0 if employment == "unemployed"
        else round(float(min(age - 18, rng.exponential(6))), 1),
        "employment": employment,
        "home": str(rng.choice(CATEGORICAL_FIELDS["home"], p=[0.4, 0.25, 0.35])),
        "purpose": str(rng.choice(CATEGORICAL_FIELDS["purpose"])),
    }
    y = default_logit(r) + rng.logistic(0, 0.6) > 0
    return json.dumps(r), LOAN_LABELS[int(y)]


def loan_samples(n: int, seed: int, split: str = "heldout",
                 start: int = 0) -> list[tuple[str, str]]:
    """``n`` (JSON record, "repaid"/"default") pairs from a loan table with a known rule."""
    return _stream(3, n, seed, split, start, _loan)
