"""Random small training graphs in the instance format of Tarnawski et al. (NeurIPS 2020), for
holding the importer's pipeline reading (docs/instances.md) to their exact DP.

``tests/data/tarnawski_training.json`` holds :func:`training_instances` with each one's time
per sample as their DP (msr-fiddle/dnn-partitioning, ``throughput-dp/dp.cpp``, built with
``g++ -O3`` outside this repository) computes it.  To make it again::

    python tests/support/training.py write DP_BINARY

Each graph has what their DP reads specially: colour classes with several forward nodes (so
classes can reach each other and must be fused), backward nodes with their class's forward
nodes, orphaned backward classes (backward nodes only), edges from forward to backward nodes,
and accelerator memory that sometimes binds.  Every forward node takes time, so their DP's
merging of zero-time nodes never applies.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data" / "tarnawski_training.json"


def training_instance(seed: int) -> dict:
    """One random training graph (module doc)."""
    rng = random.Random(seed)
    nf = rng.randint(3, 7)
    nodes, edges = [], []

    def node(backward: bool, cls: int) -> int:
        i = len(nodes)
        fpga = round(rng.uniform(0.5, 5.0), 3)
        nodes.append({"id": i, "supportedOnFpga": int(rng.random() > 0.15),
                      "cpuLatency": round(fpga * rng.uniform(1.0, 6.0), 3),
                      "fpgaLatency": fpga, "isBackwardNode": int(backward),
                      "colorClass": cls, "size": rng.randint(1, 10)})
        return i

    # forward: a random DAG in id order; a few classes get two forward nodes
    classes = list(range(nf))
    for k in range(nf):
        if k and rng.random() < 0.25:
            classes[k] = classes[rng.randrange(k)]
    fwd = [node(False, classes[k]) for k in range(nf)]
    for v in range(1, nf):
        for u in rng.sample(range(v), min(v, rng.randint(1, 2))):
            edges.append((fwd[u], fwd[v]))
    # backward: mostly one per forward class, in reverse; some orphaned classes
    bwd = []
    for k in reversed(range(nf)):
        if rng.random() < 0.7:
            bwd.append(node(True, classes[k]))
    for j in range(rng.randint(0, 2)):
        bwd.insert(rng.randrange(len(bwd) + 1), node(True, 100 + j))
    for a in range(1, len(bwd)):
        for b in rng.sample(range(a), min(a, rng.randint(1, 2))):
            edges.append((bwd[b], bwd[a]))
    for b in bwd:
        if rng.random() < 0.6:
            edges.append((fwd[rng.randrange(nf)], b))
    cost = {u: round(rng.uniform(0.0, 2.0), 3) for u, _ in edges}
    total = sum(n["size"] for n in nodes)
    return {"maxSizePerFPGA": rng.choice([total, total // 2, total // 3]),
            "maxFPGAs": rng.randint(1, 3), "maxCPUs": rng.randint(1, 2), "nodes": nodes,
            "edges": [{"sourceId": u, "destId": v, "cost": cost[u]} for u, v in sorted(set(edges))]}


def training_instances(count: int = 40) -> list[dict]:
    return [training_instance(seed) for seed in range(count)]


def their_dp(binary: str, instance: dict) -> float | None:
    """Their DP's time per sample (``None`` when it finds no answer).  With more than one CPU
    core its closing self-check fails (it adds every core's load together: one group for all
    CPUs), after it printed the answer: the answer is read all the same."""
    out = subprocess.run([binary], input=json.dumps(instance), capture_output=True, text=True)
    text = out.stdout
    if "{" not in text:
        return None
    answer, _ = json.JSONDecoder().raw_decode(text[text.index("{"):])
    return answer["maxLoad"] if answer["maxLoad"] < 1e29 else None


def write(binary: str) -> None:
    rows = []
    for seed, inst in enumerate(training_instances()):
        value = their_dp(binary, inst)
        rows.append({"seed": seed, "their_dp": value, "instance": inst})
    DATA.write_text(json.dumps(rows, indent=None, separators=(",", ":")) + "\n")


def their_max_load(data: dict, device_of: dict[int, tuple[str, int]]) -> float:
    """Their ``computeLoadForResultOrg`` (throughput-dp/dp.cpp), written from the JSON: each
    accelerator pays ``cost`` once per node whose output leaves it and once per node whose
    output enters it; the CPU pays nothing."""
    nodes = {n["id"]: n for n in data["nodes"]}
    load: dict[tuple[str, int], float] = {}
    for i, n in nodes.items():
        g = device_of[i]
        load[g] = load.get(g, 0.0) + (n["cpuLatency"] if g[0] == "CPU" else n["fpgaLatency"])
    cost = {e["sourceId"]: e["cost"] for e in data["edges"]}
    reached: dict[int, set] = {}
    for e in data["edges"]:
        if device_of[e["sourceId"]] != device_of[e["destId"]]:
            reached.setdefault(e["sourceId"], set()).add(device_of[e["destId"]])
    for u, groups in reached.items():
        for g in {device_of[u], *groups}:
            if g[0] != "CPU":
                load[g] += cost[u]
    return max(load.values())


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "write":
        write(sys.argv[2])
    else:
        sys.exit(__doc__)
