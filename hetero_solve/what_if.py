"""What if a device took (or refused) an op: the answer before and after, each after a real
re-solve (:func:`~hetero_solve.pipeline.vary`), and the refused op types ranked by what
supporting them would save (docs/costs.md, "What if").
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Callable, Sequence

from .budget import Budget
from .pipeline import Prepared, Result, solve_prepared, vary
from .rules.change import Change
from .rules.conditions import SupportChecker, op_refusal
from .rules.ops import rule_op_name

Progress = Callable[[str], None]

__all__ = ["Outcome", "outcome", "what_if", "refused_changes", "candidates", "rank_changes"]


@dataclass(frozen=True)
class Outcome:
    """An answer in the terms a what-if compares: parts, nodes on the fallback device (the
    rule file's last, ``fallback_device``), predicted latency in seconds (``None`` without a
    cost model), status, and the objective's key (smaller is better)."""

    partitions: int
    fallback: int
    fallback_device: str
    latency: float | None
    status: str
    key: tuple

    def as_dict(self) -> dict:
        return {"partitions": self.partitions, "fallback": self.fallback,
                "fallback_device": self.fallback_device, "latency": self.latency,
                "status": self.status}


def outcome(result: Result) -> Outcome:
    """The :class:`Outcome` of a solved answer."""
    m, p, sol = result.metrics, result.problem, result.solution
    last = len(p.devices) - 1
    on_last = sum(1 for q in sol.part_of if sol.part_device[q] == last)
    return Outcome(m.partitions, on_last, p.devices[last].name, m.latency, sol.status,
                   tuple(p.objective.key(m.as_dict())))


def _resolve(prepared: Prepared, *, engine: str, budget: Budget, seed: int) -> Result:
    with warnings.catch_warnings():   # the answer's own warnings are the base solve's
        warnings.simplefilter("ignore")
        return solve_prepared(prepared, engine=engine, budget=budget, seed=seed)


def what_if(prepared: Prepared, changes: Sequence[Change], *, engine: str = "auto",
            budget: Budget | None = None, seed: int = 0) -> Result:
    """The answer with every change of ``changes`` made, in order: a real re-solve within
    ``budget`` (the call's, or a part of it: ``explain`` shares one between its solves;
    default :meth:`~hetero_solve.budget.Budget.default`)."""
    for change in changes:
        prepared = vary(prepared, change)
    return _resolve(prepared, engine=engine, budget=budget or Budget.default(), seed=seed)


def candidates(prepared: Prepared) -> list[tuple[Change, Prepared]]:
    """The changes :func:`rank_changes` re-solves, each with the prepared problem it gives:
    those of :func:`refused_changes` that change some node's devices."""
    out = []
    for change in refused_changes(prepared):
        varied = vary(prepared, change)
        if varied.problem is not prepared.problem:
            out.append((change, varied))
    return out


def refused_changes(prepared: Prepared) -> list[Change]:
    """Every ``DEVICE+=OP`` that would let a device take some node it refuses now for its op
    list or an ``ops.when`` condition (not for a static shape or a pin), in device order, then
    by op name."""
    mg, rules = prepared.model_graph, prepared.rules
    placeable = mg.placeable()
    ops = [rule_op_name(mg.op_types[g], mg.domains[g]) for g in placeable]
    checker = SupportChecker(rules, mg)
    found = []
    for d, dev in enumerate(rules.devices):
        refused = {op for op, why in zip(ops, checker.reasons(d, placeable)) if why is not None}
        found += [Change(dev.name, op) for op in sorted(refused)
                  if op_refusal(dev, op) is not None or op in dev.when]
    return found


@dataclass(frozen=True)
class Ranked:
    """One candidate change with its answer (``after``) and what it saves against ``before``."""

    change: Change
    before: Outcome
    after: Outcome

    def saves(self) -> dict:
        """Parts, fallback nodes and seconds saved (negative: the answer got worse)."""
        b, a = self.before, self.after
        return {"partitions": b.partitions - a.partitions, "fallback": b.fallback - a.fallback,
                "latency": None if b.latency is None or a.latency is None
                else b.latency - a.latency}

    def as_dict(self) -> dict:
        return {"change": str(self.change), "after": self.after.as_dict(), "saves": self.saves()}


def rank_changes(prepared: Prepared, before: Outcome, *, top: int = 5, engine: str = "auto",
                 budget: Budget | None = None, seed: int = 0,
                 progress: Progress | None = None,
                 changes: Sequence[tuple[Change, Prepared]] | None = None
                 ) -> tuple[list[Ranked], int]:
    """The refused op types ranked by the objective's key of the answer supporting each
    gives, each from a real re-solve on an equal share of ``budget`` (what is left of it when
    its turn comes: under a work limit the same ranking at any load; default
    :meth:`~hetero_solve.budget.Budget.default`); ties by the change's text.  ``changes``:
    :func:`candidates`, when the caller has them.  Returns the best ``top`` and how many
    candidates there were (a change no node's support depends on, such as one refused only for
    a static shape, is not a candidate)."""
    say = progress or (lambda _m: None)
    budget = budget or Budget.default()
    changes = list(candidates(prepared) if changes is None else changes)
    ranked = []
    for k, (change, varied) in enumerate(changes):
        say(f"what if {change} ({k + 1}/{len(changes)})")
        answer = _resolve(varied, engine=engine, budget=budget.split(len(changes) - k),
                          seed=seed)
        ranked.append(Ranked(change, before, outcome(answer)))
    ranked.sort(key=lambda r: (r.after.key, str(r.change)))
    return ranked[:top], len(ranked)
