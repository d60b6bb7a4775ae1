"""``hetero-solve profile``: each node's time measured on each device a rule file names
(:mod:`.measure`; each runtime's profiler mapped back to ONNX nodes: :mod:`.onnxruntime`,
:mod:`.openvino`, :mod:`.attribute`), or imported from a runtime's own file.  It runs the
pipeline and the parts, so it stands above them; the profile file it writes, and its reader,
are :mod:`hetero_solve.times.profile`.  docs/costs.md, "Profiles"."""
