""":class:`Session`: an exported partition loaded once and run like an onnxruntime
``InferenceSession``; :func:`run_partitioned` and :func:`run` (``hetero-solve run``) on top.

The parts run in id order (a topological order, the README, "Use") and pass tensors by name.
Each part is loaded once by its backend (:mod:`hetero_solve.run.backend`); a value goes from
one part to the next as the backend returned it when both run in the same place (onnxruntime
``OrtValue`` objects on one provider's device: no copy), through ``to_numpy`` otherwise.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import warn
from ..units import instance_label
from .device_map import parse_pairs, resolve_device_map
from .backend import (NodeTime, PartRunner, RunOptions, TensorInfo, check_backend,
                      execution_warning, load_backend, part_backend)
from .common import RunError, nbytes
from .inputs import (RandomInputsError, check_dims, check_inputs, check_ranges, check_shapes,
                     describe_random, part_input_specs, random_inputs, with_shapes)
from .manifest import load_manifest, part_specs
from .report import PartRun, RunResult, save_outputs
from .onnxruntime import OrtPartRunner


class Session:
    """The parts of an OUT_DIR, each loaded once on its device's runtime, run like an
    ``onnxruntime.InferenceSession``.

    Parameters
    ----------
    out_dir : str or os.PathLike
        An OUT_DIR written by hetero-solve (``partition.json`` and the part files).
    backend : str or mapping, default "auto"
        The backend of every part (a name of :data:`~hetero_solve.run.backend.BACKENDS`), or
        device name -> backend; ``auto`` (and devices a mapping does not name): the device's
        ``runtime:`` in the rule file, OpenVINO for ``{openvino: DEVICE}``, else onnxruntime
        (:func:`~hetero_solve.run.backend.backend_of`).
    optimization : {"all", "extended", "basic", "disabled"}, optional
        onnxruntime's graph optimisation level for every part (default: the answer's, else
        "all", onnxruntime's default).
    profile : bool, default False
        Record per-node times (onnxruntime's profiler): :meth:`node_times`.
    options : RunOptions, optional
        All settings at once (then ``optimization`` and ``profile`` are ignored).  Without
        it, the parts run with the execution settings ``partition.json`` records (those of
        the profile the answer was priced with: threads, spinning; ``RunOptions.execution``),
        else the defaults.

    Raises
    ------
    hetero_solve.errors.ModelError
        OUT_DIR or its ``partition.json`` is unusable.
    RunError
        A part that its runtime cannot load, or a backend that is not installed.

    Warns
    -----
    HeteroSolveWarning
        A device's execution provider is not in this onnxruntime: its parts run on the CPU.
        ``options`` whose execution settings differ from those the answer's times were
        measured with (one warning naming both).

    Examples
    --------
    >>> sess = Session("resnet_like.hetero")                              # doctest: +SKIP
    >>> [i.name for i in sess.get_inputs()], [o.name for o in sess.get_outputs()]  # doctest: +SKIP
    >>> logits, = sess.run(None, {"image": image})                         # doctest: +SKIP
    >>> [(p.id, p.device, p.seconds) for p in sess.last_run]               # doctest: +SKIP
    """

    def __init__(self, out_dir: str | os.PathLike, *,
                 backend: str | Mapping[str, str] = "auto", optimization: str | None = None,
                 profile: bool = False, options: RunOptions | None = None,
                 manifest: dict | None = None):
        self.out_dir = Path(out_dir)
        self.manifest = manifest if manifest is not None else load_manifest(self.out_dir)
        recorded = self.manifest.get("execution")
        self.options = options or RunOptions.of_execution(
            recorded, profile=profile, **({"optimization": optimization} if optimization else {}))
        self.specs = part_specs(self.out_dir, self.manifest)
        try:
            check_backend(backend)
        except ValueError as e:
            raise RunError(str(e)) from None
        self.warnings: list[str] = []
        differ = execution_warning(str(self.out_dir / "partition.json"), recorded,
                                   self.options.execution())
        if differ:
            self.warnings.append(differ)
            warn(differ, stacklevel=2)
        #: The backend of each part (``onnxruntime``, ``openvino``), as ``backend`` chose it.
        self.backends: list[str] = [part_backend(spec, backend) for spec in self.specs]
        self.parts: list[PartRunner] = [self._load(spec, backend) for spec in self.specs]
        self._direct = self._load_direct()
        self._producer = {name: k for k, spec in enumerate(self.specs) for name in spec.outputs}
        self.last_run: list[PartRun] = []
        self._input_specs: list | None = None

    def input_specs(self) -> list:
        """The graph inputs the parts read (:class:`~hetero_solve.run.inputs.InputSpec`), with
        the dims and whole shapes the partition was solved for (``partition.json``'s ``dims``
        and ``input_shapes``): what :meth:`run` checks its feeds against."""
        if self._input_specs is None:
            shapes = check_shapes(self.manifest.get("input_shapes"), None)
            self._input_specs = with_shapes(part_input_specs(self.out_dir, self.manifest),
                                            shapes, self.manifest.get("dims") or {})
        return self._input_specs

    # -- loading ----------------------------------------------------------------------------

    def _load(self, spec, backend) -> PartRunner:
        name = part_backend(spec, backend)
        try:
            load = load_backend(name)
        except ValueError as e:
            raise RunError(str(e)) from None
        except ImportError as e:
            raise RunError(f"backend {name!r} cannot be used: {e} (pip install "
                           f"'hetero-solve[{name}]')") from None
        runner = load(spec, self.options)
        for message in getattr(runner, "warnings", []):
            if message not in self.warnings:      # once per device, not once per part
                self.warnings.append(message)
                warn(message, stacklevel=4)
        return runner

    def _load_direct(self):
        """The model of the graph outputs no part makes (constants, passed-through inputs),
        on the CPU."""
        direct = self.manifest.get("direct_outputs")
        if not direct:
            return None
        path = self.out_dir / direct["file"]
        if not path.is_file():
            raise RunError(f"{path}: no such file (it makes the graph outputs "
                           f"{list(direct['names'])})")
        return OrtPartRunner(str(path), ["CPUExecutionProvider"], self.options,
                             label=f"{path}: the graph outputs no part makes")

    # -- what InferenceSession offers ---------------------------------------------------------

    def get_inputs(self) -> list[TensorInfo]:
        """The graph inputs the parts read, in the original model's order, with the shapes
        :meth:`run` accepts: each dimension the partition was built for (``partition.json``'s
        ``dims`` and ``input_shapes``) as its size, the others as the first part reading the
        input declares them (a name, or ``None``)."""
        declared: dict[str, TensorInfo] = {}
        for runner in [*self.parts, *([self._direct] if self._direct else [])]:
            for t in runner.inputs:
                declared.setdefault(t.name, t)
        built = {spec.name: spec.shape for spec in self.input_specs()}
        dims = self.manifest.get("dims") or {}
        out = []
        for x in self.manifest["graph_inputs"]:
            if x not in declared:
                continue
            t, shape = declared[x], built.get(x)
            if shape is not None and t.shape is not None and len(shape) == len(t.shape):
                sizes = tuple(int(w) if isinstance(w, int) and w >= 0 else
                              int(dims[w]) if isinstance(w, str) and w in dims else d
                              for w, d in zip(shape, t.shape))
                t = dataclasses.replace(t, shape=sizes)
            out.append(t)
        return out

    def get_outputs(self) -> list[TensorInfo]:
        """The original model's graph outputs, as the parts making them declare them."""
        made: dict[str, TensorInfo] = {}
        for runner in [*self.parts, *([self._direct] if self._direct else [])]:
            for t in runner.outputs:
                made.setdefault(t.name, t)
        return [made[x] for x in self.manifest["graph_outputs"] if x in made]

    def run(self, output_names: Sequence[str] | None, input_feed: Mapping[str, Any],
            run_options: Any = None) -> list[np.ndarray]:
        """Run the parts that the outputs asked for need, in id order.

        Parameters
        ----------
        output_names : list of str or None
            Graph outputs to return (None: all, in the original model's order).
        input_feed : mapping of str to numpy.ndarray
            Graph inputs by name.
        run_options : ignored
            Accepted for ``InferenceSession.run`` compatibility.

        Returns
        -------
        list of numpy.ndarray
            The outputs, in the order asked.  Per-part times and bytes of this run are in
            :attr:`last_run`.

        Raises
        ------
        InputShapeError
            An input's shape is not the one the partition was built for (its shape chains
            were folded for that size).
        RunError
            An unknown input or output name, an input of another dtype or rank, a part that
            fails.
        """
        names = list(output_names) if output_names else list(self.manifest["graph_outputs"])
        unknown = [x for x in names if x not in self.manifest["graph_outputs"]]
        if unknown:
            raise RunError(f"unknown output {unknown[0]!r}: the model's outputs are "
                           f"{', '.join(map(repr, self.manifest['graph_outputs']))}")
        unknown = [x for x in input_feed if x not in self.manifest["graph_inputs"]]
        if unknown:
            raise RunError(f"unknown input {unknown[0]!r}: the model's inputs are "
                           f"{', '.join(map(repr, self.manifest['graph_inputs'])) or 'none'}")
        specs = self.input_specs()
        read = {s.name for s in specs}
        check_inputs(specs, {x: v for x, v in input_feed.items()
                             if x in read and isinstance(v, np.ndarray)},
                     self.manifest.get("dims") or {})
        env: dict[str, tuple[Any, Any]] = {x: (v, None) for x, v in input_feed.items()}
        self.last_run = []
        for k in self._needed(names):
            self._run_part(k, env)
        direct = self.manifest.get("direct_outputs") or {}
        if self._direct is not None and any(x in direct.get("names", []) for x in names):
            values = self._direct.run({t.name: self._value(t.name, env, self._direct)
                                       for t in self._direct.inputs})
            env.update((x, (v, self._direct)) for x, v in values.items())
        out = []
        for x in names:
            if x not in env:
                raise RunError(f"graph output {x!r} was produced by no part")
            value, source = env[x]
            out.append(source.to_numpy(value) if source is not None else np.asarray(value))
        return out

    def _needed(self, names: Sequence[str]) -> list[int]:
        """Ids of the parts the outputs ``names`` depend on, in id order."""
        needed: set[int] = set()
        todo = [x for x in names]
        while todo:
            k = self._producer.get(todo.pop())
            if k is not None and k not in needed:
                needed.add(k)
                todo.extend(self.specs[k].inputs)
        return sorted(needed)

    def _value(self, name: str, env: dict, runner) -> Any:
        if name not in env:
            which = ("a graph input not given" if name in self.manifest["graph_inputs"]
                     else "made by no earlier part")
            raise RunError(f"{getattr(runner, 'label', 'a part')} needs {name!r}, {which}")
        value, source = env[name]
        if source is not None and source.location != runner.location:
            return source.to_numpy(value)
        return value

    def _run_part(self, k: int, env: dict) -> None:
        runner, spec = self.parts[k], self.specs[k]
        feeds = {}
        for t in runner.inputs:
            if t.name not in env:
                which = ("a graph input not given" if t.name in self.manifest["graph_inputs"]
                         else "made by no earlier part")
                raise RunError(f"part {spec.id} ({spec.file.name}) needs {t.name!r}, {which}")
            feeds[t.name] = self._value(t.name, env, runner)
        t0 = time.perf_counter()
        values = runner.run(feeds)
        seconds = time.perf_counter() - t0
        env.update((x, (v, runner)) for x, v in values.items())
        self.last_run.append(PartRun(spec.id, spec.device, list(runner.providers), seconds,
                                     nbytes(feeds.values()), nbytes(values.values()),
                                     runner.load_seconds, spec.file.name, spec.instance,
                                     spec.instances, self.backends[k]))

    # -- profiling ----------------------------------------------------------------------------

    @property
    def load_seconds(self) -> float:
        """Seconds spent loading the parts (session creation, once)."""
        return sum(r.load_seconds for r in self.parts)

    def node_times(self) -> list[NodeTime]:
        """Per-node times of every part (``profile=True``), summed over the runs so far; the
        first call ends profiling."""
        return [t for runner in self.parts for t in runner.node_times()]


def run_partitioned(out_dir: str | os.PathLike, feeds: Mapping[str, np.ndarray], *,
                    repeat: int = 1, manifest: dict | None = None,
                    options: RunOptions | None = None,
                    backend: str | Mapping[str, str] = "auto",
                    warmup: bool = False) -> RunResult:
    """Run every part in id order on ``feeds`` (the original model's inputs); the original
    model's outputs and per-part counters.  ``repeat`` runs the whole partition that many
    times and reports each part's median time; ``warmup``: one more run first, not timed."""
    session = Session(out_dir, manifest=manifest, options=options, backend=backend)
    runs: list[list[PartRun]] = []
    if warmup:
        session.run(None, feeds)
    for _ in range(max(1, repeat)):
        values = session.run(None, feeds)
        runs.append(session.last_run)
    parts = []
    for k, first in enumerate(runs[0]):
        first.seconds = statistics.median(r[k].seconds for r in runs)
        parts.append(first)
    outputs = dict(zip(session.manifest["graph_outputs"], values))
    result = RunResult(outputs, parts, dict(feeds), warnings=list(session.warnings))
    result.node_times = session.node_times()
    result.settings = {"backend": backend if isinstance(backend, str) else dict(backend),
                       "optimization": session.options.optimization,
                       "execution": session.options.execution()}
    return result


def run(out_dir: str | os.PathLike, inputs: Mapping[str, np.ndarray] | None = None,
        dims: Mapping[str, int] | None = None, *, seed: int = 0, repeat: int = 1,
        save: str | os.PathLike | None = None,
        ranges: Mapping[str, tuple[float, float]] | None = None,
        shapes: Mapping[str, Sequence[int]] | None = None, optimization: str | None = None,
        profile: bool = False, backend: str | Mapping[str, str] = "auto",
        device_map: Sequence[str] | Mapping[str, str] | None = None,
        threads: int | None = None) -> RunResult:
    """Run the partition in ``out_dir`` (``hetero-solve run``).

    Inputs not given are generated (:func:`~hetero_solve.run.inputs.random_inputs`) from the
    part models' declared types, with symbolic dimensions from the manifest's ``dims`` and
    then ``dims``, and whole shapes from the manifest's ``input_shapes`` (those the solve
    used) and then ``shapes`` (``--shape``).  Given inputs are checked for name, dtype and
    shape.  ``save``: a directory for the outputs as ``<name>.npy`` (nothing is written
    without it).  ``profile``: per-node times in ``result.node_times``.  ``device_map``
    (OpenVINO backend): rule-file device or device instance -> OpenVINO device name, as
    ``export openvino`` takes it (``["ACC=GPU", "ACC.1=CPU"]`` or a mapping;
    :mod:`hetero_solve.run.device_map`).  ``optimization`` and ``threads`` (per part:
    onnxruntime's intra-op threads, OpenVINO's ``INFERENCE_NUM_THREADS``; 0 = the runtime's
    default) default to the execution settings ``partition.json`` records (those its times
    were measured with), else onnxruntime's ``all`` and 0; other values are a warning.

    >>> r = run("out/", {"x": np.zeros((1, 16), np.float32)})      # doctest: +SKIP
    >>> [(p.device, p.seconds) for p in r.parts], r.outputs["y"]    # doctest: +SKIP
    """
    out_dir = Path(out_dir)
    manifest = load_manifest(out_dir)
    backend_options = {}
    try:
        check_backend(backend)          # before any input is drawn or part loaded
    except ValueError as e:
        raise RunError(str(e)) from None
    if device_map:
        pairs = parse_pairs(device_map)
        devices = [(d["name"], int(d.get("instances") or 1)) for d in manifest.get("devices", [])]
        resolve_device_map(pairs, devices)   # names checked
        _check_map_runs_on_openvino(pairs, devices, part_specs(out_dir, manifest), backend)
        backend_options["device_map"] = pairs
    all_dims = check_dims(manifest.get("dims", {}), dims)
    all_shapes = check_shapes(manifest.get("input_shapes"), shapes)
    specs = with_shapes(part_input_specs(out_dir, manifest), all_shapes, all_dims,
                        given=[x for x in (shapes or {})
                               if x not in manifest.get("unused_inputs", [])])
    given = {k: np.asarray(v) for k, v in (inputs or {}).items()}
    # An input of the original model that no node reads (the original ignores it too).
    unread = [x for x in given if x in manifest.get("unused_inputs", [])]
    for x in unread:
        del given[x]
    read = {s.name for s in specs}
    folded_only = [x for x in given if x not in read and x in manifest["graph_inputs"]]
    if folded_only:
        raise RunError(f"input {folded_only[0]!r} is read only by nodes folded when solving (their "
                       f"results were fixed for dims {manifest.get('dims', {})}); no part takes it: "
                       "leave it out, or solve again with other --dim values to run other sizes")
    check_inputs(specs, given, all_dims)
    missing = [s for s in specs if s.name not in given]
    check_ranges(ranges, specs)
    feeds = {**given, **random_inputs(missing, all_dims, seed=seed, ranges=ranges)}
    how = describe_random(missing, all_dims, ranges)
    try:
        result = run_partitioned(out_dir, feeds, repeat=repeat, manifest=manifest,
                                 backend=backend,
                                 options=run_options(manifest, optimization, threads,
                                                     profile=profile,
                                                     backend_options=backend_options))
    except RunError as e:
        if not how or isinstance(e, RandomInputsError):
            raise
        raise RandomInputsError(e, how) from None
    result.random_how = how
    extra = [f"input {x!r} is read by no node; ignored" for x in unread]
    result.warnings.extend(extra)
    result.random = [s.name for s in missing]
    if save is not None:
        result.saved = save_outputs(result.outputs, save)
    for message in extra:
        warn(message)
    return result


def _check_map_runs_on_openvino(pairs: Mapping[str, str], devices: Sequence[tuple[str, int]],
                                specs: Sequence, backend: str | Mapping[str, str]) -> None:
    """A device map says which OpenVINO device runs a device's parts: refuse one naming a
    device whose parts run on onnxruntime under ``backend`` (it would be ignored)."""
    device_of = {instance_label(d, i, n): d for d, n in devices for i in range(max(1, n))}
    device_of.update((d, d) for d, _ in devices)
    on_openvino = {s.device for s in specs if part_backend(s, backend) == "openvino"}
    for key, target in pairs.items():
        device = device_of[key]
        if device in on_openvino:
            continue
        chosen = backend if isinstance(backend, str) else backend.get(device, "auto")
        why = (f"the {chosen} backend" if chosen != "auto" else
               "backend auto: its rule-file runtime is not OpenVINO")
        raise RunError(f"device map {key}={target}: {device}'s parts run on onnxruntime "
                       f"({why}), so no OpenVINO device runs them; a device map places parts "
                       "that run on OpenVINO (the openvino backend runs every part there)")


def run_options(manifest: Mapping, optimization: str | None = None, threads: int | None = None,
                **kw) -> RunOptions:
    """The options a run of the answer ``manifest`` uses: its recorded execution settings
    (``partition.json``'s ``execution``), with ``optimization`` and ``threads`` instead where
    given; ``kw`` sets the other fields (``profile``, ``backend_options``)."""
    given = {**({"optimization": optimization} if optimization else {}),
             **({"intra_op_threads": int(threads)} if threads is not None else {})}
    return RunOptions.of_execution(manifest.get("execution"), **given, **kw)
