"""Faces and their five landmarks: insightface's SCRFD-500M, run by OpenVINO and decoded here.

insightface's own ``SCRFD`` class runs the same file through onnxruntime,
but importing it pulls in insightface's whole package (onnx, ml_dtypes, its
apps): 51 MB more in every worker and 0.85 s more at each start, to decode
three score maps. The net runs here on the OpenVINO runtime the styles
already load, at one fixed 640 x 640 input that stays compiled (about 13 MB,
8 ms a photo), and its outputs are decoded as insightface decodes them:
``tests/inference/test_faces.py`` checks the boxes and landmarks against insightface's
``SCRFD`` on the shared photos.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from inference.backends import openvino_config
from inference.errors import ModelError

SIDE = 640  # the square the photo is fitted into, as insightface's default det_size
STRIDES = (8, 16, 32)  # one score map per stride, two anchors per cell
ANCHORS = 2
NMS_IOU = 0.4


@dataclass(frozen=True, eq=False)  # compared by identity: landmarks are an array
class Face:
    """A detected face in photo pixels: box (x1, y1, x2, y2), score, five landmarks."""

    box: tuple[float, float, float, float]
    score: float
    landmarks: np.ndarray  # (5, 2): eyes, nose, mouth corners

    @property
    def eye_px(self) -> float:
        return float(np.linalg.norm(self.landmarks[1] - self.landmarks[0]))

    def report(self, scale: float = 1.0) -> dict[str, object]:
        """For --json: the box in the file's own pixels (``scale`` undoes a reduced decode)."""
        return {"box": [round(v * scale, 1) for v in self.box], "score": round(self.score, 3)}


class FaceDetector:
    """SCRFD (``det_500m``) from a local file only, compiled once for its 640 px input."""

    def __init__(self, path: Path, threads: int | None = None, threshold: float = 0.5,
                 cache_dir: Path | None = None) -> None:
        import openvino as ov

        if not path.is_file():
            raise ModelError(f"the face detector {path.name} is not installed; run: animebot weights download det_500m")
        self.threshold = threshold
        # fp32 everywhere, so the boxes are insightface's on every CPU, bfloat16 units or not
        config = {**openvino_config(threads, cache_dir), "INFERENCE_PRECISION_HINT": "f32"}
        try:
            core = ov.Core()
            model = core.read_model(str(path))
            model.reshape({model.input(0): [1, 3, SIDE, SIDE]})
            if len(model.outputs) != 3 * len(STRIDES):
                raise ValueError("not an SCRFD model with landmarks")
            self._request = core.compile_model(model, "CPU", config).create_infer_request()
        except Exception as exc:
            raise ModelError(f"the face detector {path.name} does not load ({exc.__class__.__name__})") from exc
        self._lock = threading.Lock()  # one infer request; Celery workers may call from two threads
        self._centres = {stride: _anchor_centres(stride) for stride in STRIDES}

    def detect(self, rgb: np.ndarray) -> list[Face]:
        """Faces in an RGB image, biggest first."""
        h, w = rgb.shape[:2]
        ratio = h / w  # fitted into the square's top-left, the rest black
        size = (int(SIDE / ratio), SIDE) if ratio > 1 else (SIDE, int(SIDE * ratio))
        fitted = cv2.resize(rgb, size)
        scale = size[1] / h
        square = np.zeros((SIDE, SIDE, 3), np.float32)
        square[:fitted.shape[0], :fitted.shape[1]] = fitted
        blob = ((square - 127.5) / 128.0).transpose(2, 0, 1)[None]
        with self._lock:
            self._request.infer({0: np.ascontiguousarray(blob)})
            outs = [self._request.get_output_tensor(i).data.copy() for i in range(3 * len(STRIDES))]
        boxes, scores, marks = [], [], []
        for i, stride in enumerate(STRIDES):
            centres = self._centres[stride]
            score = outs[i].reshape(-1)
            keep = score >= self.threshold
            dist = outs[i + len(STRIDES)].reshape(-1, 4)[keep] * stride
            kps = outs[i + 2 * len(STRIDES)].reshape(-1, 5, 2)[keep] * stride
            c = centres[keep]
            boxes.append(np.concatenate([c - dist[:, :2], c + dist[:, 2:]], axis=1))
            marks.append(c[:, None, :] + kps)
            scores.append(score[keep])
        box, score, mark = np.concatenate(boxes) / scale, np.concatenate(scores), np.concatenate(marks) / scale
        kept = _suppress_overlaps(box, score)
        faces = [Face(tuple(float(v) for v in box[k]), float(score[k]), mark[k].astype(np.float32))  # type: ignore[arg-type]
                 for k in kept]
        return sorted(faces, key=lambda f: -(f.box[2] - f.box[0]) * (f.box[3] - f.box[1]))


def _anchor_centres(stride: int) -> np.ndarray:
    """The (x, y) pixel of every anchor of a stride's map, row by row, each cell's two anchors together."""
    n = SIDE // stride
    ys, xs = np.mgrid[:n, :n]
    cells = np.stack([xs, ys], axis=-1).reshape(-1, 2).astype(np.float32) * stride
    return np.repeat(cells, ANCHORS, axis=0)


def _suppress_overlaps(box: np.ndarray, score: np.ndarray) -> list[int]:
    """Greedy non-maximum suppression: the best box of each cluster overlapping by more than NMS_IOU.

    Areas count a box's edge pixels (+1), as insightface's SCRFD does, so the
    same boxes survive."""
    area = (box[:, 2] - box[:, 0] + 1) * (box[:, 3] - box[:, 1] + 1)
    order = np.argsort(-score, kind="stable")
    kept: list[int] = []
    while order.size:
        best, rest = order[0], order[1:]
        kept.append(int(best))
        w = np.maximum(0.0, np.minimum(box[best, 2], box[rest, 2]) - np.maximum(box[best, 0], box[rest, 0]) + 1)
        h = np.maximum(0.0, np.minimum(box[best, 3], box[rest, 3]) - np.maximum(box[best, 1], box[rest, 1]) + 1)
        overlap = w * h / (area[best] + area[rest] - w * h)
        order = rest[overlap <= NMS_IOU]
    return kept
