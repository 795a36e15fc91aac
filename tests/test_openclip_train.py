"""Our shards train in open_clip's own trainer (``open_clip_train.main``), offline, on CPU.

Real biomedical figures (``shared/data/medicat_figures``) go into two train shards and a val
shard in our contract (``{key}.jpg``/``.txt``/``.json``, ``manifest.json``); the launcher runs two
steps of the tiny config at 77 and 256 tokens in a subprocess whose every socket use is refused
and recorded, and the checkpoint must load back into open_clip at the asked context length.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from conftest import REPO, SHARED_DATA
from PIL import Image

from ray_jobs.training.argv import TrainArgs, build_train_argv
from ray_jobs.training.caption_key import JsonCaptionFilter, caption_from_json, parse_caption_key
from ray_jobs.training.manifest import select_shards
from ray_jobs.training.model_config import (
    render_model_config,
    rendered_name,
    template_names,
    write_model_config,
)

FIGURES = SHARED_DATA / "medicat_figures"

# Loaded into every trainer subprocess: refuse and record any network use, so "offline" is
# checked, not assumed (the machine has no route out anyway, and a hang would hide the cause).
NETGUARD = """
import os, socket
_log = os.environ["NETGUARD_LOG"]
def _refuse(what, *args):
    with open(_log, "a") as f:
        f.write(f"{what} {args!r}\\n")
    raise OSError(f"network use refused in test: {what} {args!r}")
_connect = socket.socket.connect
def _guarded_connect(self, address):
    if self.family == socket.AF_UNIX:
        return _connect(self, address)
    _refuse("connect", address)
socket.socket.connect = _guarded_connect
socket.socket.connect_ex = lambda self, address: _refuse("connect_ex", address)
socket.getaddrinfo = lambda *a, **k: _refuse("getaddrinfo", *a[:2])
"""


def _records() -> list[dict]:
    rows = [json.loads(line) for line in (FIGURES / "sample.jsonl").read_text().splitlines()]
    return [r for r in rows if (FIGURES / f"{r['pdf_hash']}_{r['fig_uri']}").is_file()]


def _jpeg(path: Path) -> bytes:
    with Image.open(path) as img:
        img = img.convert("RGB")
        img.thumbnail((96, 96))
        buf = io.BytesIO()
        img.save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def _write_shard(path: Path, samples: list[tuple[str, bytes, dict]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w") as tar:
        for key, jpg, meta in samples:
            for ext, data in (
                ("jpg", jpg),
                ("txt", meta["subcaption"].encode("utf-8")),
                ("json", json.dumps(meta).encode("utf-8")),
            ):
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size, info.mtime = len(data), 0
                tar.addfile(info, io.BytesIO(data))


@pytest.fixture(scope="module")
def shard_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``manifest.json`` + ``shards/``: train-000000 and -000001 (4 samples each), val (2)."""
    root = tmp_path_factory.mktemp("run")
    samples = []
    for i, rec in enumerate(_records()):
        key = f"PMC{10000 + i}v1-f{i % 3 + 1}-p00"
        refs = " ".join(rec.get("s2orc_references") or [])
        meta = {
            "key": key,
            "caption": rec["s2orc_caption"],
            "subcaption": rec["s2_caption"],
            "long_caption": refs or None,  # some have none: the fallback field is used
        }
        samples.append((key, _jpeg(FIGURES / f"{rec['pdf_hash']}_{rec['fig_uri']}"), meta))
    assert len(samples) >= 10, "medicat_figures should hold 10 captioned figures"
    parts = {
        "train-000000": samples[0:4],
        "train-000001": samples[4:8],
        "val-000000": samples[8:10],
    }
    entries = []
    for stem, part in parts.items():
        _write_shard(root / "shards" / f"{stem}.tar", part)
        entries.append(
            {"name": f"shards/{stem}.tar", "samples": len(part), "split": stem.split("-")[0]}
        )
    (root / "manifest.json").write_text(json.dumps({"shards": entries}))
    return root


# --- pure pieces -----------------------------------------------------------------------------


def test_select_shards_by_split_and_exclusion(shard_root: Path) -> None:
    sel = select_shards(shard_root / "manifest.json", "train")
    assert [Path(u).name for u in sel.urls] == ["train-000000.tar", "train-000001.tar"]
    assert sel.num_samples == 8 and all(Path(u).is_absolute() for u in sel.urls)
    assert sel.joined() == "::".join(sel.urls)

    sel = select_shards(shard_root / "manifest.json", "train", {"train-000001.tar"})
    assert sel.num_samples == 4 and sel.excluded == ("shards/train-000001.tar",)
    assert select_shards(shard_root / "manifest.json", "val").num_samples == 2

    with pytest.raises(ValueError, match="no 'train' shards"):
        select_shards(
            shard_root / "manifest.json", "train", {"shards/train-000000.tar", "train-000001.tar"}
        )


def test_select_shards_refuses_a_missing_shard(tmp_path: Path) -> None:
    # open_clip would loop forever on it, logging "Handling webdataset error"
    shard = {"name": "shards/train-000000.tar", "samples": 3, "split": "train"}
    (tmp_path / "manifest.json").write_text(json.dumps({"shards": [shard]}))
    with pytest.raises(FileNotFoundError, match=r"train-000000\.tar"):
        select_shards(tmp_path / "manifest.json")


def test_train_argv() -> None:
    argv = build_train_argv(
        TrainArgs(
            train_data=["/s/train-000000.tar", "/s/train-000001.tar"],
            train_num_samples=120,
            model="pmcvl-tiny-ctx256",
            logs_dir="/logs",
            name="r1",
            context_length=256,
            precision="fp32",
            extra=("--grad-checkpointing",),
        )
    )
    opts = dict(zip(argv[::2], argv[1::2], strict=False))
    assert opts["--dataset-type"] == "webdataset"
    assert opts["--train-data"] == "/s/train-000000.tar::/s/train-000001.tar"
    assert opts["--train-num-samples"] == "120" and opts["--model"] == "pmcvl-tiny-ctx256"
    assert opts["--force-context-length"] == "256" and opts["--precision"] == "fp32"
    assert "--pretrained" not in argv and argv[-1] == "--grad-checkpointing"

    from open_clip_train.params import parse_args

    parsed = parse_args(argv)  # open_clip's own parser accepts every flag we build
    assert parsed.train_num_samples == 120 and parsed.force_context_length == 256
    assert parsed.grad_checkpointing and not parsed.pretrained


def test_model_configs_render(tmp_path: Path) -> None:
    assert {"pmcvl-tiny", "pmcvl-ViT-B-16-longtext", "pmcvl-ViT-B-16-hftext"} <= set(
        template_names()
    )
    for ctx in (77, 154, 256, 512):
        cfg = render_model_config("pmcvl-tiny", context_length=ctx)
        assert cfg["text_cfg"]["context_length"] == ctx
    assert rendered_name("pmcvl-tiny", 154) == "pmcvl-tiny-ctx154"
    assert render_model_config("pmcvl-ViT-B-16-longtext")["text_cfg"]["context_length"] == 256

    # HF text tower: a local folder only, never a hub name; not built here (no weights)
    with pytest.raises(ValueError, match="absolute local folder"):
        render_model_config("pmcvl-ViT-B-16-hftext")
    with pytest.raises(ValueError, match="absolute local folder"):
        render_model_config("pmcvl-ViT-B-16-hftext", hf_text_path="thomas-sounack/BioClinical")
    with pytest.raises(ValueError, match="no HF text tower"):
        render_model_config("pmcvl-tiny", hf_text_path="/models/x")
    local = str(tmp_path / "bioclinical-modernbert-base")
    cfg = render_model_config("pmcvl-ViT-B-16-hftext", context_length=512, hf_text_path=local)
    text = cfg["text_cfg"]
    assert text["hf_model_name"] == text["hf_tokenizer_name"] == local
    assert text["context_length"] == 512 and text["hf_proj_type"] == "linear"
    written = write_model_config(cfg, "pmcvl-ViT-B-16-hftext-ctx512", tmp_path / "cfg")
    assert json.loads(written.read_text()) == cfg


def test_caption_key_from_json() -> None:
    assert parse_caption_key("long_caption; subcaption") == ("long_caption", "subcaption")
    raw = json.dumps({"subcaption": "A: CT", "long_caption": None}).encode()
    assert caption_from_json(raw, ("long_caption", "subcaption")) == "A: CT"
    assert caption_from_json(raw, ("long_caption",)) is None
    assert caption_from_json(b"not json", ("subcaption",)) is None

    keep = JsonCaptionFilter(("long_caption", "subcaption"))
    sample = {"__key__": "PMC1v1-f1-p00", "jpg": b"..", "txt": b"old", "json": raw}
    assert keep(sample) and sample["txt"] == b"A: CT"
    assert not keep({"jpg": b"..", "json": json.dumps({"caption": "x"}).encode()})
    assert not keep({"txt": b"x", "json": raw})  # no image


# --- the trainer itself ----------------------------------------------------------------------


def _train(shard_root: Path, tmp_path: Path, ctx: int, caption_key: str) -> tuple[Path, str]:
    guard = tmp_path / "netguard"
    guard.mkdir()
    (guard / "sitecustomize.py").write_text(NETGUARD)
    net_log = tmp_path / "network-attempts.log"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(guard), str(REPO)]),
        "NETGUARD_LOG": str(net_log),
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "2",
    }
    logs, name = tmp_path / "logs", f"tiny-ctx{ctx}"
    cmd = [
        sys.executable, "-m", "ray_jobs.training.train",
        "--manifest", str(shard_root / "manifest.json"),
        "--model", "pmcvl-tiny", "--context-length", str(ctx),
        "--caption-key", caption_key,
        "--batch-size", "4", "--epochs", "1", "--lr", "1e-3", "--warmup", "1",
        "--workers", "0", "--precision", "fp32", "--device", "cpu",
        "--log-every-n-steps", "1",
        "--logs", str(logs), "--name", name,
    ]  # fmt: skip
    proc = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=150)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert not net_log.exists(), net_log.read_text()
    return logs / name, (logs / name / "out.log").read_text()


@pytest.mark.parametrize(("ctx", "caption_key"), [(77, "txt"), (256, "long_caption;subcaption")])
def test_trainer_runs_on_our_shards(
    shard_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ctx: int, caption_key: str
) -> None:
    run_dir, out = _train(shard_root, tmp_path, ctx, caption_key)

    # 8 samples in the manifest, batch 4: two steps, both logged with a finite loss
    losses = re.findall(r"Train Epoch: 0 \[\s*(\d+)/8 .*?Contrastive_loss: ([0-9.]+)", out)
    assert [int(n) for n, _ in losses] == [4, 8], out[-2000:]
    assert all(math.isfinite(float(v)) for _, v in losses)
    ckpt = run_dir / "checkpoints" / "epoch_1.pt"
    assert ckpt.is_file()

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import open_clip

    open_clip.add_model_config(run_dir / "model_configs")
    name = f"pmcvl-tiny-ctx{ctx}"
    model, _, _ = open_clip.create_model_and_transforms(name, pretrained=str(ckpt))
    assert model.context_length == ctx
    assert model.positional_embedding.shape[0] == ctx
    tokens = open_clip.get_tokenizer(name)(["a CT scan of the brain"])
    assert tokens.shape == (1, ctx)
    feats = model.encode_text(tokens)
    assert feats.shape == (1, 64)


def test_trainer_pipeline_reads_the_chosen_caption(
    shard_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """open_clip's own webdataset pipeline, after the swap, yields the json field's text."""
    import open_clip
    from open_clip_train import data
    from open_clip_train.params import parse_args

    from ray_jobs.training.caption_key import install_caption_key

    monkeypatch.setattr(data, "filter_no_caption_or_no_image", data.filter_no_caption_or_no_image)
    install_caption_key("long_caption;subcaption")  # undone by monkeypatch at teardown

    sel = select_shards(shard_root / "manifest.json", "val")
    args = parse_args(
        build_train_argv(
            TrainArgs(sel.urls, sel.num_samples, "x", "/nonexistent", "x", batch_size=2, workers=0)
        )
    )
    args.world_size = 1
    tokenizer = open_clip.SimpleTokenizer(context_length=512)
    preprocess = open_clip.image_transform(64, is_train=False)
    loader = data.get_wds_dataset(args, preprocess, True, tokenizer=tokenizer).dataloader
    images, tokens = next(iter(loader))
    assert images.shape == (2, 3, 64, 64)

    def norm(text: str) -> str:
        return " ".join(re.sub(r"[^a-z0-9]+", " ", text.lower()).split())

    metas = []
    with tarfile.open(sel.urls[0]) as tar:
        for m in tar.getmembers():
            if m.name.endswith(".json"):
                metas.append(json.loads(tar.extractfile(m).read()))
    wanted = {norm(m["long_caption"] or m["subcaption"])[:200] for m in metas}
    assert any(m["long_caption"] not in (None, m["subcaption"]) for m in metas)  # discriminates
    special = {0, tokenizer.sot_token_id, tokenizer.eot_token_id}
    texts = [tokenizer.decode([i for i in t.tolist() if i not in special]) for t in tokens]
    got = {norm(text)[:200] for text in texts}
    assert got == wanted
