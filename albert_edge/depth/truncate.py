"""Truncated checkpoints: the first k layers, a head fitted after layer k, nothing else.

Why truncation is a CHECKPOINT transform and not a graph edit: the result is an ordinary
Hugging Face ALBERT directory (``num_hidden_layers=k``, the groups it no longer runs
dropped), so the existing ``convert`` pipeline runs on it unchanged and every invariant
holds by construction: shared weights stored once, the factorized embedding, the size
floor (computed from what is left: dropped groups' bytes are gone from file and floor
alike), verification against the truncated PyTorch model, and every client that reads
``config.json`` as written (optimum, transformers.js, LiteRT).

The directory also holds ``truncation.json``: the depth, the groups kept, the source's
identity (name + weights sha256, never a path) and how the depth was chosen. ``convert``
copies it into the artifact's manifest (key ``depth``) and model card, after checking the
directory's seal (``seal.json``, :mod:`albert_edge.sealed`): the evidence it quotes comes
from the sealed search, and neither it nor the weights can change unnoticed on the way.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.convert import TRUNCATED_CHECKPOINT
from albert_edge.depth.choose import Rule, choose, search_candidates
from albert_edge.depth.features import DepthError
from albert_edge.depth.groups import check_depth, layer_groups
from albert_edge.depth.search import DepthSearch
from albert_edge.depth.task_heads import own_any_head
from albert_edge.manifest import dumps_strict

if TYPE_CHECKING:
    from albert_edge.checkpoint import Checkpoint
    from albert_edge.options import ConvertOptions

# How convert_at_depth converts the truncated checkpoint: (checkpoint, output, options) →
# manifest; convert itself unless a caller (a precision plan) brings its own.
Build = Callable[["Checkpoint", "str | Path", "ConvertOptions"], dict[str, Any]]

PROVENANCE = TRUNCATED_CHECKPOINT.primary
# --overwrite replaces only a sealed, unchanged truncated checkpoint
TRUNCATED = TRUNCATED_CHECKPOINT.output_kind()


def pick_depth(search: DepthSearch, depth: int | str, rule: Rule | None = None) -> tuple[int, str]:
    """(depth, how it was chosen): ``"auto"`` applies ``rule`` to the held-out evidence."""
    rule = rule or Rule()
    if depth == "auto":
        result = choose(search_candidates(search), rule)
        chosen = result["chosen"]
        if chosen is None:
            raise DepthError("no searched depth passes the rule; keep full depth")
        return int(chosen["depth"]), f"auto: {rule.describe()} on the held-out split"
    k = int(depth)
    c = search.config
    check_depth(c["num_hidden_layers"], c["num_hidden_groups"], k, c["inner_group_num"])
    if k not in search.heads:
        raise DepthError(
            f"depth {k} was not searched; searched depths: "
            + ", ".join(map(str, sorted(search.heads)))
        )
    return k, f"--depth {k} (given; held-out evidence recorded beside it)"


def provenance(
    ckpt: Checkpoint, search: DepthSearch | None, depth: int, groups: int, head: str, how: str
) -> dict[str, Any]:
    """What ``truncation.json`` (and the artifact's manifest ``depth``) records."""
    from albert_edge.layout import source_record

    c = ckpt.config
    layers, g = int(c.num_hidden_layers), int(c.num_hidden_groups)
    rec: dict[str, Any] = {
        "layers": depth,
        "of_layers": layers,
        "num_hidden_groups": groups,
        "of_groups": g,
        "inner_group_num": int(c.inner_group_num),
        "layer_groups": layer_groups(layers, g, depth),
        "head": head,
        "source": source_record(ckpt),
        "chosen_by": how,
    }
    if search is not None:
        s = search.score(depth, head)
        rec["evidence"] = {
            "data": search.data,
            "held_out_metric": {"name": s.metric, "value": s.value},
            "full_depth_held_out_metric": dict(search.reference["held_out_metric"]),
            "delta": s.delta,
            "delta_low": s.delta_low,
            "delta_high": s.delta_high,
            "interval": "paired bootstrap 95 %",
            "fit": search.settings.get("fit"),
        }
    return rec


def truncated_state(
    ckpt: Checkpoint, depth: int, head: dict[str, Any]
) -> tuple[Any, dict[str, Any]]:
    """(config, state dict) of the first ``depth`` layers with ``head``; unused groups dropped."""
    import copy

    c = ckpt.config
    groups = check_depth(
        int(c.num_hidden_layers), int(c.num_hidden_groups), depth, int(c.inner_group_num)
    )
    cfg = copy.deepcopy(c)
    cfg.num_hidden_layers, cfg.num_hidden_groups = depth, groups
    if getattr(cfg, "pruned_heads", None):
        # a pruned checkpoint: the heads of the groups kept, flat index
        # group * inner_group_num + inner; a dropped group's entry names no layer
        kept = groups * int(c.inner_group_num)
        cfg.pruned_heads = {int(k): v for k, v in cfg.pruned_heads.items() if int(k) < kept}
    state = {}
    prefix = "albert.encoder.albert_layer_groups."
    for key, t in ckpt.model.state_dict().items():
        if key.startswith(prefix) and int(key[len(prefix) :].split(".")[0]) >= groups:
            continue  # a group the first `depth` layers never run
        state[key] = t
    # the pooler lives under albert.; a classifier / qa_outputs linear at the top level
    state.update({(f"albert.{k}" if k.startswith("pooler.") else k): v for k, v in head.items()})
    return cfg, state


def write_truncated(
    ckpt: Checkpoint,
    depth: int,
    out: str | Path,
    *,
    search: DepthSearch | None = None,
    head: str = "refit",
    how: str = "",
    overwrite: bool = False,
) -> Path:
    """Write the truncated checkpoint directory ``out`` (atomically) and return it.

    ``head``: "refit" takes the search's head for this depth; "own" keeps the model's.
    The result is loaded back strictly before it is kept, so what is written is exactly
    what transformers builds from its config.
    """

    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.io import atomic_output_dir
    from albert_edge.sealed import made_from, seal
    from albert_edge.torch_model import write_weights

    if head == "refit":
        if search is None or depth not in search.heads:
            raise DepthError(
                f"no re-fit head for depth {depth}: pass the depth search that has one"
            )
        tensors = search.heads[depth]
    elif head == "own":
        tensors = own_any_head(ckpt)
    else:
        raise DepthError(f"unknown head {head!r}; choose refit or own")
    cfg, state = truncated_state(ckpt, depth, tensors)
    out = Path(out)
    with atomic_output_dir(out, overwrite=overwrite, inputs=[ckpt.path], kind=TRUNCATED) as tmp:
        write_weights(tmp, cfg, ckpt.head, state)  # refuses any mismatch
        if ckpt.spiece_model is not None:
            shutil.copyfile(ckpt.spiece_model, tmp / "spiece.model")
        tok = {"do_lower_case": bool(ckpt.do_lower_case)}
        (tmp / "tokenizer_config.json").write_text(json.dumps(tok, allow_nan=False) + "\n")
        rec = provenance(ckpt, search, depth, int(cfg.num_hidden_groups), head, how or "given")
        (tmp / PROVENANCE).write_text(dumps_strict(rec, indent=2) + "\n")
        origin = made_from(ckpt.path)
        if search is not None:
            origin["depth_search"] = search.made_from
        seal(tmp, TRUNCATED_CHECKPOINT, origin)
        load_checkpoint(tmp)  # the directory loads as any checkpoint does
    return out


def check_same_source(ckpt: Checkpoint | str | Path | None, search: DepthSearch) -> None:
    """Refuse heads fitted on another model's states (they would be wrong, silently): the
    search's sealed ``made_from`` must name this checkpoint's content identity. A path is
    checked without loading the model."""
    from albert_edge.checkpoint import DEFAULT_MODEL, Checkpoint
    from albert_edge.depth.store import SEARCH
    from albert_edge.sealed import check_made_from

    path = ckpt.path if isinstance(ckpt, Checkpoint) else ckpt
    path = Path(path) if path is not None else DEFAULT_MODEL
    check_made_from(path, SEARCH, search.made_from, checkpoint=path)


@contextmanager
def truncated_checkpoint(
    checkpoint: str | Path | Checkpoint | None,
    search: DepthSearch,
    depth: int | str = "auto",
    *,
    head: str = "refit",
    rule: Rule | None = None,
) -> Iterator[Checkpoint]:
    """The truncated model, loaded from a scratch directory that lives for the block."""
    from albert_edge.checkpoint import Checkpoint, load_checkpoint

    ckpt = checkpoint if isinstance(checkpoint, Checkpoint) else load_checkpoint(checkpoint)
    check_same_source(ckpt, search)
    k, how = pick_depth(search, depth, rule)
    with tempfile.TemporaryDirectory(prefix="albert-edge-depth-") as tmp:
        name = f"{Path(ckpt.path).name}-depth{k}"
        out = write_truncated(ckpt, k, Path(tmp) / name, search=search, head=head, how=how)
        yield load_checkpoint(out)


def convert_at_depth(
    checkpoint: str | Path | Checkpoint | None,
    output: str | Path,
    options: ConvertOptions,
    search: DepthSearch,
    depth: int | str = "auto",
    *,
    head: str = "refit",
    rule: Rule | None = None,
    build: Build | None = None,
) -> dict[str, Any]:
    """``convert --depth``: truncate, then run the ordinary ``convert`` on the result.

    ``build(truncated checkpoint, output, options)`` converts it (default:
    :func:`albert_edge.convert.convert`). A precision plan passes its own (``convert
    --depth K --precision auto | --precision-plan``): the plan is searched on, and made
    for, the truncated model — its identity is the truncated weights' — and the
    artifact's manifest carries both the ``depth`` and the ``precision_plan``.

    The output is checked before any work (a destructive ``-o`` costs nothing).
    """
    from albert_edge.convert import convert
    from albert_edge.io import check_output

    inputs = [Path(checkpoint)] if isinstance(checkpoint, str | Path) else []
    check_output(Path(output), overwrite=options.overwrite, inputs=inputs)
    check_same_source(checkpoint, search)  # before the model loads
    with truncated_checkpoint(checkpoint, search, depth, head=head, rule=rule) as ckpt:
        return (build or convert)(ckpt, output, options)
