"""Typed errors. Every failure a user can cause is an :class:`AlbertEdgeError`.

The CLI prints ``str(error)`` as one line and exits non-zero; library users catch the
base class. Messages name the offending file and the fix, because the person reading
them is usually looking at a terminal, not at this code.
"""

from __future__ import annotations


class AlbertEdgeError(Exception):
    """Base class of every error albert-edge raises on purpose."""

    exit_code = 2


class CheckpointError(AlbertEdgeError):
    """A checkpoint directory/file is missing, not ALBERT, corrupt, or inconsistent."""


class ConfigError(AlbertEdgeError):
    """An ALBERT config is invalid or contradicts its weights."""


class TokenizerError(AlbertEdgeError):
    """The SentencePiece model is missing, unreadable, or disagrees with the config."""


class UnsupportedError(AlbertEdgeError):
    """A valid request the chosen route cannot honour (head, opset, precision, delegate)."""


class OutputExistsError(AlbertEdgeError):
    """The output path exists and ``--overwrite`` was not given."""


class PassError(AlbertEdgeError):
    """A graph pass broke its pre- or postcondition."""


class QuantizationError(AlbertEdgeError):
    """Quantization cannot proceed (already quantized model, bad calibration data, ...)."""


class PrecisionPlanError(AlbertEdgeError):
    """A precision plan cannot be searched, read or applied (albert_edge.mixed)."""


class NoPlanError(PrecisionPlanError):
    """No precision plan quantizing anything stays inside the accuracy budget."""

    exit_code = 1


class VerificationError(AlbertEdgeError):
    """An artifact disagrees with its reference beyond tolerance."""

    exit_code = 1


class TooFewRowsError(AlbertEdgeError, ValueError):
    """Fewer rows than a statistic can support (a bootstrap interval, a held-out split, an
    exit-head fit): the message names the documented minimum."""


class BenchmarkError(AlbertEdgeError):
    """A benchmark could not be run as asked."""


class OutputError(AlbertEdgeError):
    """The output cannot be written (permission, full disk, read-only file system, ...)."""


class ArtifactIntegrityError(AlbertEdgeError):
    """An artifact's files or manifest.json differ from what albert-edge wrote."""

    exit_code = 1


class KernelSetupError(AlbertEdgeError):
    """Running on another kernel family needs set-up that is missing or broken."""


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where the run is, like Ctrl-C's ``KeyboardInterrupt``.

    A subclass of ``KeyboardInterrupt`` on purpose: every cleanup that SIGINT already runs
    (temp directories, locks, scratch, bench children) runs for ``timeout``, systemd and a
    closed terminal too, and no ``except Exception`` swallows it. ``signum`` gives the
    exit status, 128 + N.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class WorkingDirectoryError(AlbertEdgeError):
    """The current directory is gone (deleted or moved while a shell was in it)."""
