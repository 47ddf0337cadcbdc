"""The analytic counts behind floor_bytes and GOP/s, checked against transformers."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from albert_edge.bench.flops import (
    floor_bytes,
    gemm_shapes,
    model_flops,
    param_count,
    weight_gemms,
)
from albert_edge.heads import HEADS


@pytest.mark.parametrize("config_name", ["tiny", "tiny-groups", "tiny-unfactorized"])
@pytest.mark.parametrize("head", sorted(HEADS))
def test_param_count_matches_transformers(config_name: str, head: str) -> None:
    os.environ.setdefault("USE_TF", "0")
    from albert_edge.accounting import unique_parameters
    from albert_edge.checkpoint import build_model
    from albert_edge.configs import make_config

    config = make_config(config_name)
    config.num_labels = 3
    model = build_model(config, HEADS[head])
    assert param_count(config.to_dict(), head) == unique_parameters(model)


def test_floor_matches_the_accounting(make_checkpoint: Callable[..., Path]) -> None:
    from albert_edge.accounting import account
    from albert_edge.checkpoint import load_checkpoint

    ckpt = load_checkpoint(make_checkpoint("tiny-groups"))
    acc = account(ckpt)
    cfg = ckpt.config.to_dict()
    for precision, key in (
        ("fp32", "fp32"),
        ("fp16", "fp16"),
        ("int8-dynamic", "int8"),
        ("int4", "int4"),
    ):
        assert floor_bytes(cfg, ckpt.head.name, precision) == acc["floor_bytes"][key]
    assert floor_bytes(cfg, ckpt.head.name, "bf13") is None


def test_flops_formula() -> None:
    from albert_edge.configs import make_config

    cfg = make_config("albert-base").to_dict()
    s, h, e, i = 128, 768, 128, 3072
    layer = 8 * s * h * h + 4 * s * s * h + 4 * s * h * i
    expected = 2 * s * e * h + 12 * layer + 2 * h * h + 2 * h * 2
    assert model_flops(cfg, "sequence-classification", 1, s) == expected
    assert model_flops(cfg, "sequence-classification", 8, s) == 8 * expected
    # about 22.5 GFLOP per 128-token sequence for albert-base (matmuls only)
    assert 22e9 < expected < 23e9
    # groups share weights but not compute: L x K layer applications
    grouped = {**cfg, "num_hidden_groups": 2, "inner_group_num": 2}
    base = model_flops(cfg, "base", 1, s) - 2 * s * e * h - 2 * h * h
    assert model_flops(grouped, "base", 1, s) - 2 * s * e * h - 2 * h * h == 2 * base
    assert model_flops(cfg, "multiple-choice", 2, s, choices=4) == 8 * model_flops(
        cfg, "multiple-choice", 1, s
    )


def test_gemm_shapes() -> None:
    from albert_edge.configs import make_config

    cfg = make_config("albert-base").to_dict()
    assert gemm_shapes(cfg, 128) == [
        (128, 128, 768),
        (128, 768, 768),
        (128, 768, 3072),
        (128, 3072, 768),
    ]


@pytest.mark.parametrize("name", ["albert-base", "tiny"])
def test_weight_gemms_are_the_matrix_flops_less_attention_and_heads(name: str) -> None:
    """What the roofline bound counts: every weight product as often as it runs. Their
    FLOPs are the model's, less the attention core (4·S²·H per layer) and the head."""
    from albert_edge.configs import make_config

    cfg = make_config(name).to_dict()
    cfg.update(inner_group_num=2, num_hidden_groups=1)
    s = 24
    h, layers = cfg["hidden_size"], cfg["num_hidden_layers"]
    gemms = weight_gemms(cfg, s)
    total = sum(n * 2 * m * k * c for (m, k, c), n in gemms)
    core = layers * 2 * 4 * s * s * h
    assert total == model_flops(cfg, "base", 1, s) - 2 * h * h - core
    assert [shape for shape, _ in gemms] == gemm_shapes(cfg, s)
    assert dict(gemms)[(s, cfg["intermediate_size"], h)] == layers * 2
