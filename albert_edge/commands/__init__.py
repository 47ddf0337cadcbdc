"""The ``albert-edge`` subcommands that are no package of their own (verify, inspect,
kernels, bench, export-triton): each module adds its parser and runs one API call.
:mod:`albert_edge.cli` assembles them with the packages' own ``command.py`` parsers."""
