"""The compiled problem: plain data that every algorithm reads the same way.

Nodes are ``0..n-1`` (the model's placeable nodes: not ``Constant``, not folded).  Devices are
``0..D-1`` in priority order.  Everything is lists of ints so that the greedy heuristic, CP-SAT,
SAT, the baselines and the validator share one view and tests can build problems by hand with
:func:`make_problem`.  What a partition of it measures (memory of a part, transfer, fallback,
the order of parts) is defined in :mod:`hetero_solve.measures`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import (TYPE_CHECKING, Iterable, Iterator, Mapping, MutableMapping, NamedTuple,
                    Sequence, Union)

if TYPE_CHECKING:
    from .costs import CostModel
    from .measures.arrays import ProblemArrays

OBJECTIVE_TERMS = ("fallback", "partitions", "transfer")
#: Terms that need a cost model (``Problem.costs``): latency and time per sample (docs/costs.md).
COST_TERMS = ("latency", "throughput")
TERMS = OBJECTIVE_TERMS + COST_TERMS


@dataclass(frozen=True)
class Device:
    name: str
    memory: int | None = None        # bytes per instance; None = unlimited
    instances: int = 1
    enforce_values: bool = True      # value-dependent inputs bind on this device


@dataclass(frozen=True)
class Objective:
    """docs/problem.md: lexicographic ``order`` (default) or a weighted sum ``weights``."""
    order: tuple[str, ...] = OBJECTIVE_TERMS
    weights: Mapping[str, float] | None = None

    @property
    def lexicographic(self) -> bool:
        return self.weights is None

    def key(self, values: Mapping[str, float]) -> tuple:
        """Sort key: smaller is better."""
        if self.weights is None:
            return tuple(values[t] for t in self.order)
        return (sum(w * values[t] for t, w in self.weights.items()),)

    def terms(self) -> tuple[str, ...]:
        """The terms it ranks or weighs."""
        return tuple(self.order) if self.weights is None else tuple(self.weights)

    def uses_costs(self) -> bool:
        """Whether a term needs the cost model (``latency``, ``throughput``)."""
        return any(t in COST_TERMS for t in self.terms())

    def describe(self) -> str:
        if self.weights is None:
            return "lexicographic " + " > ".join(self.order)
        return "weighted " + " + ".join(f"{w}*{t}" for t, w in self.weights.items())


class NonStaticShape(NamedTuple):
    """Why a static-shape device refuses a node: its first tensor (inputs, then outputs)
    whose shape is not static."""

    role: str                  # "input" or "output"
    position: int
    tensor: str
    shape: tuple | None        # None: unknown rank
    device: str

    def text(self) -> str:
        shape = "unknown" if self.shape is None else list(self.shape)
        return (f"{self.role} {self.position} {self.tensor!r} has a non-static shape {shape} "
                f"({self.device} needs static shapes)")


class NamedReason(NamedTuple):
    """A reason found once for every node of one signature (op, tensor types, attributes),
    with the node's own tensor names to put in its holes.  ``pieces`` are texts and
    ``(is_input, position, quoted)`` holes (shared by every node of the signature)."""

    pieces: tuple
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    def text(self) -> str:
        out = []
        for piece in self.pieces:
            if type(piece) is str:
                out.append(piece)
            else:
                is_input, k, quoted = piece
                x = (self.inputs if is_input else self.outputs)[k]
                out.append(repr(x) if quoted else x)
        return "".join(out)


#: An entry of :class:`Refusals`: ``None`` (taken), a text, or a record whose ``text()`` is
#: the text.  Plain data: no callables, nothing that refers to the model.
Reason = Union[None, str, NonStaticShape, NamedReason]


def reason_text(entry: Reason) -> str | None:
    """The text of a :class:`Refusals` entry."""
    return entry if entry is None or type(entry) is str else entry.text()


class Refusals(MutableMapping):
    """``(node, device) -> why the device refuses the node``, kept as compile found it: one
    row per device in node order, each entry a :data:`Reason`.  The text of a record is made
    when it is read: only errors and explanations read them, and a static-shape device can
    refuse 70,000 nodes of a large model.  Entries set later (pins) override the rows."""

    def __init__(self, rows: list[list[Reason]], overrides: dict[tuple[int, int], str] | None = None):
        self._rows = rows
        self._set: dict[tuple[int, int], str] = dict(overrides or {})

    def __getitem__(self, key: tuple[int, int]) -> str:
        found = self._set.get(key)
        if found is not None:
            return found
        v, d = key
        entry = self._rows[d][v] if 0 <= d < len(self._rows) and 0 <= v < len(self._rows[d]) else None
        if entry is None:
            raise KeyError(key)
        return reason_text(entry)

    def entry(self, v: int, d: int) -> Reason:
        """The reason as kept (a record, a text or ``None``), overrides first."""
        found = self._set.get((v, d))
        if found is not None:
            return found
        return self._rows[d][v] if 0 <= d < len(self._rows) and 0 <= v < len(self._rows[d]) else None

    def __setitem__(self, key: tuple[int, int], why: str) -> None:
        self._set[key] = why

    def __delitem__(self, key: tuple[int, int]) -> None:
        self[key]   # noqa: B018 - KeyError when absent
        self._set.pop(key, None)
        v, d = key
        if 0 <= d < len(self._rows) and 0 <= v < len(self._rows[d]):
            self._rows[d][v] = None

    def __iter__(self) -> Iterator[tuple[int, int]]:
        yield from self._set
        for d, row in enumerate(self._rows):
            for v, entry in enumerate(row):
                if entry is not None and (v, d) not in self._set:
                    yield v, d

    def __len__(self) -> int:
        return sum(1 for _ in self)


@dataclass(frozen=True)
class FoldOption:
    """A folded node that may be left unfolded (docs/problem.md: foldable nodes *may* be folded).

    Folding is not free under memory limits: a folded ``Transpose(W)`` is a second constant as
    large as ``W`` in every part that reads it, while unfolded it runs next to the reader of
    ``W`` and costs nothing more.  Compile lists here the folded nodes whose folding can cost
    memory (those whose outputs some node reads as data, not only as a value-dependent input;
    the others are always folded), with what placing one needs.  Ids are the problem's.

    Attributes
    ----------
    graph_index : int
        The node's index in the model's ``graph.node``.
    name, op_type : str
    allowed : tuple of int
        Devices that take it, priority order (as ``Problem.allowed``; pins do not apply to
        folded nodes).
    const_inputs : tuple of int
        Constants it reads (``Problem.const_names`` ids), its folded producers' outputs
        included.
    outputs : tuple of int
        The constants its outputs are while it is folded (``Problem.const_names`` ids).
    value_readers : tuple of int
        Placed nodes that read one of its outputs as a value-dependent input (docs/problem.md).
    requires : tuple of int
        Other options (indices into ``Problem.fold_options``) that read its outputs: unfolding
        this one unfolds them too (their inputs are then no longer constant).
    value_requires : tuple of int
        Those of ``requires`` that read one of its outputs as a value-dependent input (an
        ``Expand`` reading a ``Shape``): placed, they need it in another part on a device
        that enforces value inputs, as ``value_readers`` do.
    """

    graph_index: int
    name: str
    op_type: str
    allowed: tuple[int, ...]
    const_inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    value_readers: tuple[int, ...] = ()
    requires: tuple[int, ...] = ()
    value_requires: tuple[int, ...] = ()


@dataclass(frozen=True)
class MissingDims:
    """What input dims with no value cost one static-shape device
    (:func:`hetero_solve.compile.missing_dims`): the nodes it refuses *only* for them.

    Parameters
    ----------
    device : str
    nodes : int
        How many nodes the device would take with the dims given.
    dims : list of str
        The named dims with no value.
    inputs : list of str
        Graph inputs with anonymous dims (``?``) with no value.
    hint : str
        The flags to pass (``--dim seq=N``, ``--shape x=1,?``).
    """

    device: str
    nodes: int
    dims: list[str]
    inputs: list[str]
    hint: str

    def text(self) -> str:
        """One line for the user."""
        what = []
        if self.dims:
            shown = ", ".join(repr(n) for n in self.dims)
            what.append(f"dim{'s' if len(self.dims) > 1 else ''} {shown}")
        if self.inputs:
            shown = ", ".join(repr(x) for x in self.inputs)
            what.append(f"anonymous dims of input{'s' if len(self.inputs) > 1 else ''} {shown}")
        plural = len(self.dims) > 1 or bool(self.inputs)
        return (f"{self.device} refused {self.nodes} node(s) only because "
                f"{' and '.join(what)} {'have' if plural else 'has'} no value: pass {self.hint}")


@dataclass
class ProblemInfo:
    """What the export and the messages need to know about where a problem came from; no
    algorithm reads it.

    Parameters
    ----------
    folded : list of int
        ``graph.node`` indices of the nodes folded into constants (not placed).
    unfolded : list of int
        ``graph.node`` indices of foldable nodes an answer places instead
        (:func:`hetero_solve.exact.folds.unfold`).
    constant_nodes : list of int
        ``graph.node`` indices of the ``Constant`` nodes.
    member_names : dict of int to str
        ``graph.node`` index -> name, for every member of a quantized unit (the problem keeps
        one name per unit).
    warnings : list of str
        What compile and the solve noticed, for the user.
    missing_dims : list of MissingDims
        What input dims with no value cost each static-shape device
        (:func:`hetero_solve.compile.missing_dims`); empty until the pipeline asks.
    format : str or None
        The instance file format of an imported instance (``None`` for ONNX models).
    open_sizes : list of str
        Tensors and constants whose size counts an unknown dimension or element type as 1
        (docs/problem.md): a memory or transfer figure that holds one is a lower bound
        (:class:`OpenSizes`).
    execution : dict or None
        The execution settings the measured times were taken with (a profile's), which
        ``partition.json`` records and ``run`` applies; ``None`` without a profile.
    noise : float
        How far a measured device's whole-model run moves, relative (a profile's largest
        ``DeviceProfile.noise``): a split is kept over the best single device only when
        predicted faster by more than this (:func:`hetero_solve.pipeline.never_slower`);
        0 without a profile.
    """

    folded: list[int] = field(default_factory=list)
    unfolded: list[int] = field(default_factory=list)
    constant_nodes: list[int] = field(default_factory=list)
    member_names: dict[int, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    missing_dims: list[MissingDims] = field(default_factory=list)
    format: str | None = None
    open_sizes: list[str] = field(default_factory=list)
    execution: dict | None = None
    noise: float = 0.0


@dataclass
class Problem:
    """A model and a rule file compiled into plain lists: what every algorithm solves.

    Parameters
    ----------
    devices : list of Device
        In priority order (index 0 = most preferred): name, memory per instance in bytes
        (``None`` = unlimited), instances, whether value-dependent inputs bind there.
    names, op_types : list of str
        Per node.
    allowed : list of tuple of int
        Per node, the devices it may use in priority order; ``allowed[v][0]`` is its
        preferred device (pins already applied).
    succ, pred : list of list of int
        Data edges ``u -> v`` (deduplicated): what orders the parts (condition 3).  An
        imported training graph's are its forward edges alone (docs/instances.md); its
        tensors keep every edge.
    value_pred : list of list of int
        ``u in value_pred[v]``: ``u`` makes a value-dependent input of ``v`` (docs/problem.md).
    tensor_names, tensor_bytes, tensor_producer, tensor_consumers, tensor_is_output
        Per non-constant tensor: name, bytes, producing node (-1 for a graph input), reading
        nodes, whether it is a graph output.
    node_inputs, node_outputs : list of list of int
        Per node, the tensor ids it reads (distinct) and writes.
    const_names, const_bytes : list
        Per constant (initializers, ``Constant`` outputs, folded values).
    node_consts : list of list of int
        Per node, the constants it reads, its subgraphs' included (distinct).
    objective : Objective
    pinned : list of int
        Per node, the device its pin names, or -1.
    graph_index : list of int
        Per node, its index in the model's ``graph.node``.
    refusals : mapping
        ``(node, device) -> why the device refuses the node``.
    info : ProblemInfo
        What the export and messages need (folded nodes, member names, warnings).
    members : dict of int to tuple of int
        Nodes that stand for several ONNX nodes (a quantized unit, contracted by
        :func:`hetero_solve.contract.contract`): node -> every member's index in
        ``graph.node``, graph order.  Other nodes are ``graph_index[v]`` alone
        (:meth:`graph_nodes`).
    fold_options : list of FoldOption
        Folded nodes that may instead be placed (compile fills it when a device has a memory
        limit; empty otherwise).  The problem as given has them all folded;
        :func:`hetero_solve.exact.folds.unfold` makes the problem with some of them placed.
    arrays : ProblemArrays or None
        The graph, tensors and constants above as flat numpy arrays, for fast measures on
        large problems (:func:`hetero_solve.measures.problem_arrays` builds them; compile
        does for large models).  Derived data: when present, the lists it was built from
        must not change.
    costs : CostModel or None
        Node times, part costs and links (:mod:`hetero_solve.costs`): what the ``latency``
        and ``throughput`` terms read; ``None`` when the rule file gives none.
    colocation : list of list of int
        Groups of nodes that must share a device instance (an imported instance's colour
        classes); empty for ONNX models.

    Examples
    --------
    >>> p = make_problem(3, [(0, 1), (1, 2)], [[0, 1], [1], [0]], ["NPU", "CPU"])
    >>> p.n, p.preferred(1), p.why_not(1, 0)
    (3, 1, 'NPU does not take Op')
    """

    devices: list[Device]
    names: list[str]
    op_types: list[str]
    allowed: list[tuple[int, ...]]       # device indices a node may go to, priority order
    succ: list[list[int]]                # data dependencies u -> v, deduplicated
    pred: list[list[int]]
    value_pred: list[list[int]]          # u in value_pred[v]: u makes a value input of v
    # Non-constant tensors read or written by nodes (memory and transfer).
    tensor_names: list[str]
    tensor_bytes: list[int]
    tensor_producer: list[int]           # producing node, -1 for a graph input
    tensor_consumers: list[list[int]]
    tensor_is_output: list[bool]         # a graph output
    node_inputs: list[list[int]]         # tensor ids a node reads (distinct)
    node_outputs: list[list[int]]        # tensor ids a node writes
    # Constants (initializers, Constant outputs, folded outputs) read by nodes.
    const_names: list[str]
    const_bytes: list[int]
    node_consts: list[list[int]]
    objective: Objective = field(default_factory=Objective)
    pinned: list[int] = field(default_factory=list)     # device index, or -1
    graph_index: list[int] = field(default_factory=list)  # node -> index in model.graph.node
    refusals: MutableMapping[tuple[int, int], str] = field(default_factory=dict)  # (node, device) -> why
    info: ProblemInfo = field(default_factory=ProblemInfo)
    arrays: "ProblemArrays | None" = field(default=None, repr=False, compare=False)
    fold_options: list[FoldOption] = field(default_factory=list)
    members: dict[int, tuple[int, ...]] = field(default_factory=dict)
    costs: "CostModel | None" = None
    colocation: list[list[int]] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.names)

    def graph_nodes(self, v: int) -> tuple[int, ...]:
        """The indices in the model's ``graph.node`` that node ``v`` stands for (its quantized
        unit's, or its own)."""
        found = self.members.get(v)
        return found if found is not None else (self.graph_index[v],)

    def preferred(self, v: int) -> int:
        return self.allowed[v][0]

    def has_memory_limits(self) -> bool:
        return any(d.memory is not None for d in self.devices)

    def why_not(self, v: int, d: int) -> str:
        """Why node ``v`` may not go to device ``d`` (empty when it may)."""
        if d in self.allowed[v]:
            return ""
        return self.refusals.get((v, d), f"{self.devices[d].name} does not take {self.op_types[v]}")


# -- building problems by hand (tests, benchmarks, generators) -------------------------------

def make_problem(n: int, edges: Iterable[tuple[int, int]], allowed: Sequence[Iterable[int]],
                 devices: Sequence[Device | str] = ("ACC", "CPU"), *,
                 value_edges: Iterable[tuple[int, int]] = (),
                 tensor_bytes: Sequence[int] | int = 1, const_bytes: Sequence[int] | int = 0,
                 outputs: Iterable[int] | None = None, names: Sequence[str] | None = None,
                 op_types: Sequence[str] | None = None,
                 objective: Objective | None = None) -> Problem:
    """A problem from a DAG: node ``v`` writes one tensor (``tensor_bytes[v]`` bytes) read by
    its successors, and reads one constant of ``const_bytes[v]`` bytes (none when 0).
    ``value_edges`` are edges ``(u, v)`` where ``u`` makes a value-dependent input of ``v``
    (they are added as data edges too).  ``outputs`` default to the sinks.

    >>> p = make_problem(3, [(0, 1), (1, 2)], [[0], [1], [0]])
    >>> p.succ, [p.preferred(v) for v in range(3)]
    ([[1], [2], []], [0, 1, 0])
    """
    devs = [d if isinstance(d, Device) else Device(d) for d in devices]
    value_edges = list(value_edges)
    succ: list[list[int]] = [[] for _ in range(n)]
    pred: list[list[int]] = [[] for _ in range(n)]
    for u, v in list(edges) + value_edges:
        if not (0 <= u < n and 0 <= v < n) or u == v:
            raise ValueError(f"bad edge ({u}, {v})")
        if v not in succ[u]:
            succ[u].append(v)
            pred[v].append(u)
    value_pred: list[list[int]] = [[] for _ in range(n)]
    for u, v in value_edges:
        if u not in value_pred[v]:
            value_pred[v].append(u)
    tb = [tensor_bytes] * n if isinstance(tensor_bytes, int) else list(tensor_bytes)
    cb = [const_bytes] * n if isinstance(const_bytes, int) else list(const_bytes)
    outs = set(v for v in range(n) if not succ[v]) if outputs is None else set(outputs)
    const_names, const_sizes, node_consts = [], [], []
    for v in range(n):
        if cb[v]:
            node_consts.append([len(const_names)])
            const_names.append(f"w{v}")
            const_sizes.append(cb[v])
        else:
            node_consts.append([])
    return Problem(
        devices=devs, names=list(names) if names else [f"n{v}" for v in range(n)],
        op_types=list(op_types) if op_types else ["Op"] * n,
        allowed=[tuple(a) for a in allowed], succ=succ, pred=pred, value_pred=value_pred,
        tensor_names=[f"t{v}" for v in range(n)], tensor_bytes=tb,
        tensor_producer=list(range(n)), tensor_consumers=[list(s) for s in succ],
        tensor_is_output=[v in outs for v in range(n)],
        node_inputs=[list(p) for p in pred], node_outputs=[[v] for v in range(n)],
        const_names=const_names, const_bytes=const_sizes, node_consts=node_consts,
        objective=objective or Objective(), pinned=[-1] * n, graph_index=list(range(n)))
