"""The Ray executor for whileai: ``simulate(..., executor="ray")``.

``RayExecutor`` is importable from ``whileai_ray.executor`` (it imports Ray); nothing here
imports Ray, so loading the plugin costs nothing until a run uses it.
"""
