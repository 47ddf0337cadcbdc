"""Which depths a truncated ALBERT can be written as, and with which groups.

Why this module exists: transformers' ALBERT runs outer layer ``i`` of ``L`` with group
``int(i / (L / G))`` (``AlbertTransformer.forward``). A truncated model must run the same
groups in the same order, but the only way to say so in ``config.json`` (which optimum,
transformers.js and LiteRT read as written) is a new pair ``(k, G')``, and the same
formula applied to it. With ``L=12, G=2`` the first 8 layers use group 0 six times and
group 1 twice; ``(8, 2)`` says 4 + 4 and ``(8, 1)`` says 8 × group 0: no config expresses
it. Such depths are refused, never rounded: a config that silently runs other weights
would export, verify and ship a model nobody searched.

The check is done by brute force over ``G'`` with transformers' own formula, so it holds
for any ``L, G`` (not only when ``G`` divides ``L``): ``(11, 2)`` is exactly the first 11
layers of ``(12, 2)`` (six layers of group 0, then five of group 1).

A second constraint comes from transformers' code, not from ALBERT: each group is handed
``head_mask[g * int(L/G) : (g + 1) * int(L/G)]`` and indexes it once per inner layer, so a
config with ``inner_group_num > int(L'/G')`` raises IndexError in ``forward`` (PyTorch,
and so ONNX export and verification). Such depths are refused too (``inner_group_num``).
"""

from __future__ import annotations

from albert_edge.errors import UnsupportedError


def group_of_layer(i: int, num_layers: int, num_groups: int) -> int:
    """The group transformers runs at outer layer ``i`` (its exact float expression)."""
    return int(i / (num_layers / num_groups))


def layer_groups(num_layers: int, num_groups: int, depth: int) -> list[int]:
    """The group each of the first ``depth`` outer layers runs, in order."""
    return [group_of_layer(i, num_layers, num_groups) for i in range(depth)]


def runs_in_transformers(num_layers: int, num_groups: int, inner_group_num: int) -> bool:
    """Whether transformers' ``AlbertTransformer.forward`` can run this config: every group
    used gets a ``head_mask`` slice of at least ``inner_group_num`` entries."""
    per = int(num_layers / num_groups)
    used = set(layer_groups(num_layers, num_groups, num_layers))
    return all(min(num_layers, (g + 1) * per) - g * per >= inner_group_num for g in used)


def truncated_num_groups(
    num_layers: int, num_groups: int, depth: int, inner_group_num: int = 1
) -> int | None:
    """``G'`` such that the config ``(depth, G')`` runs exactly the first ``depth`` layers of
    ``(num_layers, num_groups)``, keeping groups ``0..G'-1``, and transformers can run it;
    None when no ``G'`` does."""
    if not 1 <= depth <= num_layers:
        return None
    want = layer_groups(num_layers, num_groups, depth)
    for g in range(1, depth + 1):
        if layer_groups(depth, g, depth) == want and set(want) == set(range(g)):
            return g if runs_in_transformers(depth, g, inner_group_num) else None
    return None


def representable_depths(num_layers: int, num_groups: int, inner_group_num: int = 1) -> list[int]:
    """Every depth ``1..L`` a config can express faithfully (see the module docstring)."""
    return [
        k
        for k in range(1, num_layers + 1)
        if truncated_num_groups(num_layers, num_groups, k, inner_group_num) is not None
    ]


def check_depth(num_layers: int, num_groups: int, depth: int, inner_group_num: int = 1) -> int:
    """``G'`` for ``depth``, or an :class:`UnsupportedError` that lists the depths that work."""
    if not 1 <= depth <= num_layers:  # the real cause, not the groups
        raise UnsupportedError(
            f"depth {depth} is outside the model's 1..{num_layers} layers; choose one of: "
            + ", ".join(map(str, representable_depths(num_layers, num_groups, inner_group_num)))
        )
    g = truncated_num_groups(num_layers, num_groups, depth, inner_group_num)
    if g is None:
        ok = ", ".join(map(str, representable_depths(num_layers, num_groups, inner_group_num)))
        raise UnsupportedError(
            f"depth {depth} cannot be written as an ALBERT config for a model with "
            f"{num_layers} layers in {num_groups} groups of {inner_group_num} inner layer(s) "
            f"(its first {depth} layers run groups "
            f"{layer_groups(num_layers, num_groups, min(depth, num_layers))}; no "
            "num_hidden_groups expresses that in a config transformers can run); "
            f"choose one of: {ok}"
        )
    return g
