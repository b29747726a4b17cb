"""image-cnn: JPEG bytes → Pillow decode/resize/crop/normalise → small ResNet → top-5 labels.

Why this pipeline: it is the classic vision serving path, where preprocess (JPEG decode and
resize, on the CPU, per request, sized by the *input* image) often costs as much as the batched
forward pass, and varies with the image while the forward pass does not.
"""
from __future__ import annotations

import io
from typing import Any

import numpy as np
import torch
from PIL import Image, ImageFile
from torch import nn

from sample_models import data
from sample_models._common import TrainedPipeline

ImageFile.LOAD_TRUNCATED_IMAGES = False  # a truncated JPEG must fail, not decode half-grey


def load_crop(raw: bytes, resize: int = data.RESIZE, crop: int = data.CROP) -> np.ndarray:
    """JPEG bytes → ``crop``x``crop``x3 uint8 array (shorter side to ``resize``, centre crop).

    Shared by the pipeline and ``train.py`` so the model is trained on exactly what it serves.
    Raises ``ValueError`` for bytes Pillow cannot decode completely.
    """
    try:
        img = Image.open(io.BytesIO(raw))
        img.load()  # decode now: Image.open is lazy and would not notice a truncated file
    except (OSError, SyntaxError, Image.DecompressionBombError) as e:
        raise ValueError(f"cannot decode image ({len(raw)} bytes): {e}") from e
    img = img.convert("RGB")
    w, h = img.size
    scale = resize / min(w, h)
    nw, nh = max(resize, round(w * scale)), max(resize, round(h * scale))
    img = img.resize((nw, nh), Image.Resampling.BILINEAR)
    left, top = (nw - crop) // 2, (nh - crop) // 2
    return np.array(img.crop((left, top, left + crop, top + crop)))  # a writable copy


class ResidualBlock(nn.Module):
    """Two 3x3 convs with batch norm and a (projected when the shape changes) skip connection."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.skip: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            self.skip = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                      nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + self.skip(x))


class ShapeResNet(nn.Module):
    """ResNet-style CNN for 64x64 input: stride-2 stem + max-pool, then 3 residual stages.

    The early down-sampling keeps it cheap enough to train in about a minute on two CPU
    cores; the shapes are large enough in the crop that 16x16 feature maps still see corners.
    """

    def __init__(self, n_classes: int, widths: tuple[int, ...] = (32, 64, 128)) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, widths[0], 3, 2, 1, bias=False),
                                  nn.BatchNorm2d(widths[0]), nn.ReLU(), nn.MaxPool2d(2))
        stages, cin = [], widths[0]
        for i, w in enumerate(widths):
            stages.append(ResidualBlock(cin, w, 1 if i == 0 else 2))
            cin = w
        self.stages = nn.Sequential(*stages)
        self.head = nn.Linear(cin, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.stages(self.stem(x)).mean((2, 3)))


class ImageCNNPipeline(TrainedPipeline):
    """Classifies JPEG photos of shapes; responses carry the top label and the top 5 scores."""

    name = "image-cnn"
    description = ("Small ResNet-style CNN classifying JPEG photos of shapes (Pillow decode, "
                   "resize, crop, normalise; softmax top-5)")
    dtypes = ("float32", "bfloat16", "float16")
    #: which optimisation levers fit (latency.pipelines.levers): "cnn" allows channels_last too.
    model_kind = "cnn"

    def build_model(self, meta: dict[str, Any]) -> nn.Module:
        return ShapeResNet(len(meta["labels"]), tuple(meta["widths"]))

    def __init__(self, device: torch.device, dtype: torch.dtype, **args: Any) -> None:
        super().__init__(device, dtype, **args)
        meta = self.meta
        self.resize, self.crop = int(meta["resize"]), int(meta["crop"])
        # normalisation runs in float32 on the device, then the tensor is cast to ``dtype``
        self.mean = torch.tensor(meta["mean"], device=device).view(3, 1, 1)
        self.std = torch.tensor(meta["std"], device=device).view(3, 1, 1)

    def sample_inputs(self, n: int, seed: int) -> list[bytes]:
        """JPEG bytes from the held-out stream (never used in training)."""
        return [raw for raw, _ in data.shape_samples(n, seed, split="heldout")]

    def preprocess(self, raw: bytes) -> torch.Tensor:
        """Decode, resize, crop on the CPU; copy the uint8 crop (4x smaller than float) over."""
        pixels = torch.from_numpy(load_crop(raw, self.resize, self.crop))
        x = pixels.to(self.device).permute(2, 0, 1).float().div_(255)
        return ((x - self.mean) / self.std).to(self.dtype)

    def preprocess_naive(self, raw: bytes) -> torch.Tensor:
        """The beginner's preprocess (``--pre naive``): same pixels, same answer, slow.

        Re-encodes the decoded photo as PNG "to be safe" (lossless, so the pixels do not
        change), then normalises pixel by pixel in a Python loop over float64 lists and builds
        the tensor from those lists: needless format conversions and 4,096 interpreted loop
        steps where ``preprocess`` does one vectorised operation.
        """
        try:
            img = Image.open(io.BytesIO(raw))
            img.load()
        except (OSError, SyntaxError, Image.DecompressionBombError) as e:
            raise ValueError(f"cannot decode image ({len(raw)} bytes): {e}") from e
        png = io.BytesIO()
        img.convert("RGB").save(png, format="PNG")
        crop = load_crop(png.getvalue(), self.resize, self.crop)
        h, w = crop.shape[:2]
        pixels = crop.astype(np.float64).reshape(-1, 3).tolist()
        (m0, m1, m2), (s0, s1, s2) = self.mean.flatten().tolist(), self.std.flatten().tolist()
        red, green, blue = [0.0] * len(pixels), [0.0] * len(pixels), [0.0] * len(pixels)
        for i, (r, g, b) in enumerate(pixels):
            red[i] = (r / 255.0 - m0) / s0
            green[i] = (g / 255.0 - m1) / s1
            blue[i] = (b / 255.0 - m2) / s2
        x = torch.tensor([red, green, blue], dtype=torch.float64).view(3, h, w)
        return x.to(self.dtype).to(self.device)

    @torch.inference_mode()
    def forward(self, batch: torch.Tensor) -> torch.Tensor:
        return self.model(batch)

    def postprocess(self, item: torch.Tensor) -> dict[str, Any]:
        probs = torch.softmax(item.float().cpu(), dim=0)
        scores, idx = probs.topk(min(5, len(self.labels)))
        top5 = [{"label": self.labels[i], "score": float(s)}
                for s, i in zip(scores.tolist(), idx.tolist())]
        return {"label": top5[0]["label"], "top5": top5}
