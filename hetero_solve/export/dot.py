"""Graphviz pictures: ``affinity.dot`` (nodes coloured by device, as OpenVINO's
``hetero_affinity_<model>.dot``) and ``partitions.dot`` (the DAG of parts, as its
``hetero_subgraphs_<model>.dot`` and Glow's ``DAG.dot``)."""

from __future__ import annotations

from ..problem import Problem
from ..measures import quotient_edges
from ..solution import Solution
from ..units import format_bytes, instance_label

PALETTE = ["#8dd3c7", "#fdb462", "#bebada", "#fb8072", "#80b1d3", "#b3de69", "#fccde5",
           "#ffffb3", "#bc80bd", "#ccebc5"]


def _q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def affinity_dot(problem: Problem, sol: Solution, title: str = "model") -> str:
    colours = {d: PALETTE[d % len(PALETTE)] for d in range(len(problem.devices))}
    lines = [f"digraph {_q(title + ' affinity')} {{", "  rankdir=TB;",
             '  node [shape=box, style="rounded,filled", fontsize=10];']
    for d, dev in enumerate(problem.devices):
        lines.append(f'  legend_{d} [label={_q(dev.name)}, fillcolor="{colours[d]}", shape=note];')
    for v in range(problem.n):
        p = sol.part_of[v]
        d = sol.part_device[p]
        label = f"{problem.names[v]}\\n{problem.op_types[v]} | part {p}"
        lines.append(f'  n{v} [label={_q(label)}, fillcolor="{colours[d]}"];')
    for u, succ in enumerate(problem.succ):
        for v in succ:
            style = "" if sol.part_of[u] == sol.part_of[v] else " [penwidth=2, color=red]"
            lines.append(f"  n{u} -> n{v}{style};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def partitions_dot(problem: Problem, sol: Solution, memory: list[int], title: str = "model") -> str:
    sizes = [0] * sol.num_parts
    for p in sol.part_of:
        sizes[p] += 1
    bytes_between: dict[tuple[int, int], int] = {}
    for t, u in enumerate(problem.tensor_producer):
        if u < 0:
            continue
        a = sol.part_of[u]
        for b in {sol.part_of[c] for c in problem.tensor_consumers[t]} - {a}:
            bytes_between[(a, b)] = bytes_between.get((a, b), 0) + problem.tensor_bytes[t]
    lines = [f"digraph {_q(title + ' partitions')} {{", "  rankdir=TB;",
             '  node [shape=box, style="rounded,filled", fontsize=11];']
    for p in range(sol.num_parts):
        d = sol.part_device[p]
        dev = problem.devices[d]
        label = (f"part {p}\\n{instance_label(dev.name, sol.part_instance[p], dev.instances)}"
                 f"\\n{sizes[p]} nodes\\n"
                 f"{format_bytes(memory[p])}")
        lines.append(f'  p{p} [label={_q(label)}, fillcolor="{PALETTE[d % len(PALETTE)]}"];')
    for a, b in sorted(quotient_edges(problem, sol.part_of)):
        lines.append(f"  p{a} -> p{b} [label={_q(format_bytes(bytes_between.get((a, b), 0)))}];")
    lines.append("}")
    return "\n".join(lines) + "\n"
