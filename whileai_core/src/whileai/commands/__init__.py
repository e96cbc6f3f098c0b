"""The ``whileai`` command's subcommands, one module each; ``whileai.cli`` wires them up."""
