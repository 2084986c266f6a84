"""The models tests draw with: the real files in ../shared/models, and the widths of a tiny random one.

Only paths and names here: whether a file is there is asked where it is needed (tests/conftest.py's
fixtures skip with the reason), so a clone with no ../shared beside it imports this as well.
"""
from __future__ import annotations

from inference.generator import GeneratorWidths
from testkit.bot_harness import REPO

SHARED = REPO.parent / "shared"
MODELS = SHARED / "models"
HAYAO_FILE = MODELS / "animeganv2_hayao_256x256_integer_quant.tflite"
CUTE_FILE = MODELS / "AnimeGANv3_tiny_Cute.onnx"
DET_FILE = MODELS / "det_500m.onnx"
SELFIE_FILE = MODELS / "selfie_segmentation.tflite"
CUGAN_PARAM = MODELS / "realcugan_up2x_conservative.param"  # HD: Real-CUGAN 2x's ncnn files
CUGAN_BIN = MODELS / "realcugan_up2x_conservative.bin"
# A style about a ninth of Hayao's cost a frame, for the bots of tests about the path a photo
# takes rather than its drawing; Hayao where the cute model is absent.
QUICK_STYLE = "cute" if CUTE_FILE.is_file() else "hayao"
# The styles a data dir has once every file in ../shared/models is imported.
STYLE_NAMES = ("hayao", "cute", "hayao_v3", "shinkai", "jp_face", "sketch", "cartoon")

# A very narrow generator: the real code path, milliseconds an image (tests/conftest.py's tiny_model and tiny_store).
TINY_WIDTHS = GeneratorWidths(
    a=(4, 8, 8), b=(8, 8), c_in=8, res=8, hidden=(8, 8, 8, 8), c_out=8, d=(8, 8), e=(8, 8, 4)
)
