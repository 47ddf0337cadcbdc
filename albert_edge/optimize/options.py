"""What ``optimize`` is asked to do: the flags as one typed value, beside the API.

:class:`Options` is what :func:`albert_edge.optimize.api.optimize` takes (the command
builds it from argparse); nothing here reads a file or loads a model.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass
class Options:
    """One run's flags. ``max_drop``: points of the task's metric the artifact may lose
    against the given model; ``max_minutes``: the time budget the plan fits;
    ``finetune`` / ``trim`` / ``prune``: the levers ``--no-finetune`` / ``--no-trim`` /
    ``--no-prune`` turn off."""

    checkpoint: Path | None
    data: Path
    max_drop: float
    output: Path
    target: str = "onnx"
    objective: str = "latency"
    seq_len: int = 128
    corpus: Path | None = None
    work_dir: Path | None = None
    cluster: str | None = None
    max_minutes: float = 45.0
    quiet: bool = False
    overwrite: bool = False
    workers: int | None = None
    finetune: bool = True
    trim: bool = True
    prune: bool = True
    min_lower_bound: float = -1.5
    report_data: Path | None = None  # the report rows (never fitted on, never chosen on)
    choose_data: Path | None = None  # the rows the rule admits on (never fitted on)

    def given_files(self) -> dict[str, Path | None]:
        """The held parts the user named a file for (``--choose-data``/``--report-data``)."""
        return {"choose": self.choose_data, "report": self.report_data}

    def work(self) -> Path:
        """The work directory: ``--work-dir``, else :func:`default_work_dir`."""
        return self.work_dir or default_work_dir(self.output)


def default_work_dir(output: Path) -> Path:
    """A hidden sibling of ``-o`` (in the directory the user named for the output, never
    inside a folder of theirs): ``.NAME.optimize-work``."""
    return output.parent / f".{output.name}.optimize-work"
