"""Synthetic models for the scaling study (docs/study/scaling/): the examples stop at 124 nodes,
so "time against graph size" needs bigger graphs.

Each model is a random layered network of elementwise ops on [1, 256] float tensors: a main
chain with residual Adds reaching back up to 12 nodes, and some parallel branches; about 8 %
of the nodes are ops the accelerator profiles refuse (Erf, Exp); Mul reads a 1 KiB constant,
so memory limits (rules/multi-card.yaml) bind.  Deterministic for a given size and seed.

    python docs/study/scaling/make_models.py OUT_DIR [SIZES...]   (default 250 1000 4000)
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

WIDTH = 256


def make(n: int, seed: int = 0) -> onnx.ModelProto:
    rng = random.Random(seed * 1_000_003 + n)
    nodes, inits = [], []
    made = ["x"]
    for v in range(n):
        a = made[-1] if rng.random() < 0.85 else made[rng.randrange(max(0, len(made) - 6), len(made))]
        r = rng.random()
        out = f"t{v}"
        if r < 0.08:
            nodes.append(helper.make_node(rng.choice(["Erf", "Exp"]), [a], [out], name=f"n{v}"))
        elif r < 0.30 and len(made) > 3:
            b = made[rng.randrange(max(0, len(made) - 12), len(made) - 1)]
            nodes.append(helper.make_node("Add", [a, b], [out], name=f"n{v}"))
        elif r < 0.45:
            w = f"w{v}"
            inits.append(numpy_helper.from_array(
                np.full((1, WIDTH), 0.5, dtype=np.float32), w))
            nodes.append(helper.make_node("Mul", [a, w], [out], name=f"n{v}"))
        else:
            nodes.append(helper.make_node(rng.choice(["Relu", "Sigmoid", "Tanh"]), [a], [out],
                                          name=f"n{v}"))
        made.append(out)
    # Every tensor nobody reads becomes an output, so no node is dead.
    read = {x for node in nodes for x in node.input}
    outs = [t for t in made[1:] if t not in read]
    graph = helper.make_graph(
        nodes, f"scaling{n}", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, WIDTH])],
        [helper.make_tensor_value_info(t, TensorProto.FLOAT, [1, WIDTH]) for t in outs], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "scaling-models")
    sizes = [int(s) for s in sys.argv[2:]] or [250, 1000, 4000]
    out.mkdir(parents=True, exist_ok=True)
    for n in sizes:
        path = out / f"synthetic_{n}.onnx"
        onnx.save(make(n), path)
        print(path)
