"""Code that runs inside the CodeExec sandbox: standard library only (see server.py)."""
