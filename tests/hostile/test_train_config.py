"""``train --config`` knows AlbertConfig's keys without importing transformers (so a typo
is refused before torch loads): the list must stay the one transformers has."""

from __future__ import annotations

import inspect

from albert_edge.configs import CONFIG_KEYS


def test_config_keys_are_albertconfigs() -> None:
    from transformers import AlbertConfig

    params = inspect.signature(AlbertConfig.__init__).parameters
    own = {k: p.default for k, p in params.items() if k not in ("self", "kwargs")}
    assert set(CONFIG_KEYS) == set(own)
    for key, default in own.items():  # the declared type is the default's
        assert isinstance(default, CONFIG_KEYS[key]) or CONFIG_KEYS[key] is float, key
