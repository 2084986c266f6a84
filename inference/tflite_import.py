"""Read AnimeGANv2 weights out of a TFLite export, without TensorFlow.

A TFLite file is a flatbuffer: a list of operators, each naming its input
tensors, and buffers holding the constant tensors. The generator's
convolutions appear in graph order, which is also the order of the PyTorch
module's ``Conv2d`` layers, so we walk CONV_2D and DEPTHWISE_CONV_2D operators
and hand their (dequantized) kernels to the matching layers. LayerNorm scales
and offsets are found by their TensorFlow scope names, and the graph itself
tells us the normalisation epsilon and the upsampling grid.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import tflite
import torch
from torch import nn

from inference.errors import ModelError
from inference.generator import Generator, GeneratorWidths, UpsampleMode

_DTYPES = {
    tflite.TensorType.FLOAT32: np.float32,
    tflite.TensorType.FLOAT16: np.float16,
    tflite.TensorType.INT8: np.int8,
    tflite.TensorType.UINT8: np.uint8,
    tflite.TensorType.INT32: np.int32,
}
_OPS = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}


def _norm_scopes(n_res: int) -> list[str]:
    """TF scope of every LayerNorm, in the PyTorch module's GroupNorm order."""
    scopes = ["A/LayerNorm", "A/LayerNorm_1", "A/LayerNorm_2", "B/LayerNorm", "B/LayerNorm_1", "C/LayerNorm"]
    for r in range(1, n_res + 1):
        scopes += [f"C/r{r}/LayerNorm", f"C/r{r}/1", f"C/r{r}/2"]
    scopes += ["C/LayerNorm_1", "D/LayerNorm", "D/LayerNorm_1", "E/LayerNorm", "E/LayerNorm_1", "E/LayerNorm_2"]
    return scopes


class TfliteGraph:
    """Just enough of a TFLite subgraph to read constants and operators."""

    def __init__(self, data: bytes) -> None:
        try:
            self.model = tflite.Model.GetRootAsModel(data, 0)
            self.graph = self.model.Subgraphs(0)
            self.ops = [self._op(i) for i in range(self.graph.OperatorsLength())]
        except Exception as exc:  # flatbuffers raise anything on garbage input
            raise ModelError(f"not a readable TFLite model ({exc.__class__.__name__})") from exc
        self.by_name = {self.name(i): i for i in range(self.graph.TensorsLength())}
        # Float16 exports keep weights as fp16 constants behind a DEQUANTIZE op.
        self.dequantized_from = {op[2][0]: op[1][0] for op in self.ops if op[0] == "DEQUANTIZE"}

    def _op(self, i: int) -> tuple[str, list[int], list[int], object]:
        op = self.graph.Operators(i)
        code = self.model.OperatorCodes(op.OpcodeIndex())
        kind = _OPS.get(max(code.BuiltinCode(), code.DeprecatedBuiltinCode()), "?")
        ins = [op.Inputs(j) for j in range(op.InputsLength())]
        outs = [op.Outputs(j) for j in range(op.OutputsLength())]
        return kind, ins, outs, op

    def name(self, index: int) -> str:
        return self.graph.Tensors(index).Name().decode()

    def const(self, index: int) -> np.ndarray:
        """A constant tensor as float32, dequantized with its per-channel scales."""
        index = self.dequantized_from.get(index, index)
        t = self.graph.Tensors(index)
        raw = self.model.Buffers(t.Buffer()).DataAsNumpy()
        if isinstance(raw, int) or t.Type() not in _DTYPES:
            raise ModelError(f"tensor {self.name(index)!r} is not a constant this importer understands")
        shape = tuple(t.ShapeAsNumpy()) if t.ShapeLength() else ()
        values = raw.view(_DTYPES[t.Type()]).reshape(shape).astype(np.float32)
        q = t.Quantization()
        if t.Type() in (tflite.TensorType.INT8, tflite.TensorType.UINT8, tflite.TensorType.INT32) and q is not None:
            scale, zero = q.ScaleAsNumpy(), q.ZeroPointAsNumpy()
            if not isinstance(scale, np.ndarray):
                raise ModelError(f"tensor {self.name(index)!r} is integer but has no scale")
            bshape = [1] * values.ndim
            if values.ndim:
                bshape[q.QuantizedDimension()] = -1
            values = (values - zero.reshape(bshape).astype(np.float32)) * scale.reshape(bshape)
        return values

    def named(self, name: str) -> np.ndarray:
        if name not in self.by_name:
            raise ModelError(f"the TFLite model has no tensor {name!r}; is it an AnimeGANv2 generator?")
        return self.const(self.by_name[name])


def op_options(op: object, cls: type) -> object:
    table = op.BuiltinOptions()  # type: ignore[attr-defined]
    opts = cls()
    opts.Init(table.Bytes, table.Pos)
    return opts


def load_tflite_generator(path: Path) -> Generator:
    """Build a Generator whose weights are the TFLite model's, dequantized to float32."""
    g = TfliteGraph(Path(path).read_bytes())
    convs = [op for op in g.ops if op[0] in ("CONV_2D", "DEPTHWISE_CONV_2D")]
    kernels, biases = [], []
    for kind, ins, _outs, _op in convs:
        w = g.const(ins[1])
        # CONV_2D stores OHWI, depthwise 1HWC; PyTorch wants OIHW and C1HW.
        kernels.append(w.transpose(0, 3, 1, 2) if kind == "CONV_2D" else w.transpose(3, 0, 1, 2))
        biases.append(g.const(ins[2]) if len(ins) > 2 and ins[2] >= 0 else None)

    widths = _widths_from_kernels(kernels)
    resize = [op for op in g.ops if op[0] == "RESIZE_BILINEAR"]
    if len(resize) != 2:
        raise ModelError(f"expected 2 bilinear upsamplings, found {len(resize)}")
    rb = op_options(resize[0][3], tflite.ResizeBilinearOptions)
    if rb.AlignCorners():  # type: ignore[attr-defined]
        raise ModelError("align_corners upsampling is not supported")
    upsample: UpsampleMode = "half_pixel" if rb.HalfPixelCenters() else "asymmetric"  # type: ignore[attr-defined]

    net = Generator(widths, upsample=upsample, eps=_layernorm_eps(g))
    conv_layers = [m for m in net.modules() if isinstance(m, nn.Conv2d)]
    norm_layers = [m for m in net.modules() if isinstance(m, nn.GroupNorm)]
    if len(conv_layers) != len(kernels):
        raise ModelError(f"the TFLite model has {len(kernels)} convolutions, the generator {len(conv_layers)}")
    state: dict[str, torch.Tensor] = {}
    names = {m: n for n, m in net.named_modules()}
    for layer, w, b in zip(conv_layers, kernels, biases):
        if tuple(layer.weight.shape) != w.shape:
            raise ModelError(f"{names[layer]}: kernel {w.shape} does not fit {tuple(layer.weight.shape)}")
        state[f"{names[layer]}.weight"] = torch.from_numpy(np.ascontiguousarray(w))
        if layer.bias is not None:
            state[f"{names[layer]}.bias"] = torch.from_numpy(b if b is not None else np.zeros(w.shape[0], np.float32))
        elif b is not None and np.abs(b).max() > 0:
            raise ModelError(f"{names[layer]}: the TFLite conv has a bias the generator does not")
    for norm, scope in zip(norm_layers, _norm_scopes(len(widths.hidden)), strict=True):
        state[f"{names[norm]}.weight"] = torch.from_numpy(g.named(f"generator/G_MODEL/{scope}/gamma"))
        state[f"{names[norm]}.bias"] = torch.from_numpy(g.named(f"generator/G_MODEL/{scope}/beta"))
    net.load_state_dict(state, strict=True)
    return net.eval()


def _widths_from_kernels(kernels: list[np.ndarray]) -> GeneratorWidths:
    """Read every layer width off the kernel shapes, so pruned exports load too."""
    if len(kernels) != 25:
        raise ModelError(f"an AnimeGANv2 generator has 25 convolutions; this model has {len(kernels)}")
    out = [k.shape[0] for k in kernels]
    # Order: a0 a1 a2 b0 b1 c_in, then per residual block (expand, depthwise, project), c_out d0 d1 e0 e1 e2 final.
    hidden = tuple(out[6 + 3 * r] for r in range(4))
    return GeneratorWidths(
        a=(out[0], out[1], out[2]),
        b=(out[3], out[4]),
        c_in=out[5],
        res=out[8],
        hidden=hidden,  # type: ignore[arg-type]
        c_out=out[18],
        d=(out[19], out[20]),
        e=(out[21], out[22], out[23]),
    )


def _layernorm_eps(g: TfliteGraph) -> float:
    """The epsilon TF added to the variance (1e-12 for tf.contrib's layer_norm)."""
    for kind, ins, _outs, _op in g.ops:
        if kind == "ADD" and g.name(ins[0]).endswith("moments/variance"):
            return float(g.const(ins[1]).reshape(-1)[0])
    return 1e-12
