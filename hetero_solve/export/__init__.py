"""Export: everything written for an answer (the README, "Use").

- :func:`build_manifest` (``partition.json``) and :func:`affinity_map` (``affinity.json``);
- :func:`build_part_model` (``partN_DEVICE.onnx``), :func:`build_direct_model`
  (``direct_outputs.onnx``), :func:`build_annotated_model` (``model.annotated.onnx``);
- :func:`affinity_dot` and :func:`partitions_dot` (the pictures);
- :func:`write_result`: all of them into OUT_DIR, moved in whole when complete; only a new
  or empty folder or a previous answer is accepted, and only its files are replaced.

Export reads a :class:`~hetero_solve.result.Result` and never changes it.
"""

from .annotated import build_annotated_model
from .dot import affinity_dot, partitions_dot
from .manifest import affinity_map, build_manifest
from .submodels import build_direct_model, build_part_model, part_file
from .writer import default_out_dir, write_result

__all__ = ["write_result", "default_out_dir", "build_manifest", "affinity_map",
           "build_part_model", "build_direct_model", "build_annotated_model", "part_file",
           "affinity_dot", "partitions_dot"]
