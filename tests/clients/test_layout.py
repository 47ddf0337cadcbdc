"""The artifact layout: a Hugging Face model repo with transformers.js' file names, its
tokenizer.json token-for-token equal to the slow tokenizer, a model card from the manifest,
and no path of the build machine anywhere."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from albert_edge.data import read_sst2
from albert_edge.reference import SAMPLE_DATA

ROOT = Path(__file__).resolve().parents[2]
HF_FILES = {
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "spiece.model",
    "README.md",
    "manifest.json",
}
# Texts that exercise the three documented differences of ALBERT's fast tokenizer from
# plain SentencePiece (user-defined pieces, kept whitespace, digit-comma) and accents.
TRICKY = [
    "k-19 (2002) costs £5 – or €7 , 1,000 times .",
    "trailing space ",
    "  leading and   inner spaces",
    "Café naïve RÉSUMÉ",
    "\"quoted\" ``tex quotes'' [MASK] [CLS] [SEP]",
    "",
]


def test_layout_is_a_hf_repo_with_transformers_js_names(client_artifacts) -> None:
    for kind, file in (
        ("fp32", "onnx/model.onnx"),
        ("int8", "onnx/model_quantized.onnx"),
        ("int4", "onnx/model_q4.onnx"),
    ):
        art = client_artifacts[kind]
        manifest = json.loads((art / "manifest.json").read_text())
        assert manifest["model_file"] == file and (art / file).is_file()
        assert {p.name for p in art.iterdir()} >= HF_FILES
        assert set(manifest["files"]) == {
            str(p.relative_to(art)) for p in art.rglob("*") if p.is_file()
        } - {"manifest.json"}
        config = json.loads((art / "config.json").read_text())
        dtype = {"fp32": "fp32", "int8": "q8", "int4": "q4"}[kind]
        assert config["transformers.js_config"] == {"dtype": dtype}
        tok_cfg = json.loads((art / "tokenizer_config.json").read_text())
        # the length the embedded model was trained at (its own tokenizer config), not
        # its 512 positions: clients cut windows where the model learned to read
        assert config["max_position_embeddings"] == 512
        assert tok_cfg["model_max_length"] == 64
        special = json.loads((art / "special_tokens_map.json").read_text())
        assert special["pad_token"] == "<pad>" and special["cls_token"] == "[CLS]"


def test_no_build_machine_path_in_any_file(client_artifacts) -> None:
    """grep -r for the paths of this machine (the repo, the temp dir, $HOME) finds nothing."""
    needles = {str(ROOT), str(ROOT.parent), str(Path.home()), "/tmp/", "/work/"}
    for art in client_artifacts.values():
        needles.add(str(art.parent))
    for art in client_artifacts.values():
        for f in art.rglob("*"):
            if f.is_file():
                data = f.read_bytes()
                for n in needles:
                    assert n.encode() not in data, (f, n)
        src = json.loads((art / "manifest.json").read_text())["source"]
        assert src["embedded"] is True and "path" not in src and len(src["weights_sha256"]) == 64


def test_model_card_states_the_manifest_figures(client_artifacts) -> None:
    art = client_artifacts["int8"]
    manifest = json.loads((art / "manifest.json").read_text())
    card = (art / "README.md").read_text()
    assert card.startswith("---\n") and "pipeline_tag: text-classification" in card
    assert f"{manifest['sizes']['file_bytes'] / 1e6:.2f} MB" in card
    assert f"{manifest['sizes']['floor_bytes'] / 1e6:.2f} MB" in card
    assert "int8-dynamic" in card and "onnx/model_quantized.onnx" in card
    sqnr = manifest["verification"]["outputs"]["logits"]["sqnr_db"]
    assert f"{sqnr:.1f}" in card
    assert "onnxruntime-web" in card and "transformers.js" in card


def _glued_user_pieces(text: str, pieces: list[str]) -> bool:
    """True where a user-defined piece touches another character ("k-19", "...", "1,000"),
    TeX quotes or extra whitespace appear: the documented cases where the slow tokenizer splits differently
    from the fast one (albert_edge/tokenizer.py, points 1 and 3)."""
    glued = (re.escape(p) for p in [*pieces, "``", "''"])
    if text != " ".join(text.split()):  # point 2: the fast tokenizer keeps whitespace
        return True
    return any(re.search(rf"\S{p}|{p}\S", text) for p in glued) or bool(re.search(r"\d,", text))


def test_tokenizer_json_matches_fast_slow_and_own_tokenizer(client_artifacts) -> None:
    """tokenizer.json (the tokenizers library) == transformers' AlbertTokenizerFast converted
    from the SentencePiece model == albert_edge.tokenizer, id for id, on every row of the
    packaged SST-2 dev sample and on edge cases; == the slow AlbertTokenizer wherever the
    slow one is not documented to differ (user-defined pieces glued to a word)."""
    import sentencepiece.sentencepiece_model_pb2 as pb
    from tokenizers import Tokenizer
    from transformers import AlbertTokenizer, AlbertTokenizerFast

    from albert_edge.tokenizer import AlbertTokenizer as Own

    art = client_artifacts["fp32"]
    fast = Tokenizer.from_file(str(art / "tokenizer.json"))
    hf_fast = AlbertTokenizerFast(vocab_file=str(art / "spiece.model"), from_slow=True)
    slow = AlbertTokenizer(str(art / "spiece.model"))
    own = Own(art / "spiece.model")
    proto = pb.ModelProto()
    proto.ParseFromString((art / "spiece.model").read_bytes())
    user = [p.piece for p in proto.pieces if p.type == pb.ModelProto.SentencePiece.USER_DEFINED]
    assert "-" in user
    texts = [t for _, t in read_sst2(SAMPLE_DATA)] + TRICKY
    compared_slow = 0
    for text in texts:
        ids = fast.encode(text).ids
        assert ids == hf_fast(text)["input_ids"], text
        assert ids == own.encode(text, padding="none").input_ids[0], text
        if not _glued_user_pieces(text, user):
            assert ids == slow(text)["input_ids"], text
            compared_slow += 1
    assert compared_slow > len(texts) // 2


def test_quantize_command_writes_the_same_layout(client_artifacts, tmp_path) -> None:
    """``albert-edge quantize`` re-targets config.json's transformers.js dtype."""
    from albert_edge.onnx.quant.artifact import quantize_artifact
    from albert_edge.options import ConvertOptions

    out = tmp_path / "q4"
    m = quantize_artifact(
        client_artifacts["fp32"], out, ConvertOptions(precision="int4", verify=False)
    )
    assert m["model_file"] == "onnx/model_q4.onnx" and (out / m["model_file"]).is_file()
    assert m["quantized_from"] == "onnx/model.onnx"
    assert json.loads((out / "config.json").read_text())["transformers.js_config"]["dtype"] == "q4"
    assert (out / "tokenizer.json").is_file() and (out / "README.md").is_file()
    assert not list((out / "onnx").glob("model.onnx"))


@pytest.mark.parametrize("kind", ["fp32", "int8", "int4"])
def test_checker_full_check(client_artifacts, kind: str) -> None:
    import onnx

    art = client_artifacts[kind]
    model_file = json.loads((art / "manifest.json").read_text())["model_file"]
    onnx.checker.check_model(str(art / model_file), full_check=True)
