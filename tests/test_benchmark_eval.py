"""From shards to scores on CPU: the tiny CLIP config trained with the benchmark's articles
excluded, then ``pmcvl eval-retrieval`` on its checkpoint. The figures are whatever they are,
so the test recomputes them from the checkpoint with open_clip and numpy alone and compares;
the metric code is checked on known answers in ``test_benchmark_metrics``. Every subprocess
refuses (and records) any network use."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from test_benchmark_build import make_dataset

from ray_jobs.benchmark.build import build_benchmark
from ray_jobs.benchmark.data import load_benchmark

NETGUARD = """
import os, socket
def _refuse(*args):
    with open(os.environ["NETGUARD_LOG"], "a") as f:
        f.write(repr(args) + "\\n")
    raise OSError("network use refused in test")
_connect = socket.socket.connect
def _guarded(self, address):
    return _connect(self, address) if self.family == socket.AF_UNIX else _refuse(address)
socket.socket.connect = _guarded
socket.getaddrinfo = lambda *a, **k: _refuse(*a[:2])
"""


def _run(cmd: list[str], tmp_path: Path, timeout: int = 180) -> subprocess.CompletedProcess:
    guard = tmp_path / "netguard"
    guard.mkdir(exist_ok=True)
    (guard / "sitecustomize.py").write_text(NETGUARD)
    log = tmp_path / "network-attempts.log"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(guard), str(REPO)]),
        "NETGUARD_LOG": str(log),
        "OMP_NUM_THREADS": "2",
    }
    proc = subprocess.run(
        cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert not log.exists(), log.read_text()
    return proc


def test_train_excluding_the_benchmark_then_evaluate(tmp_path: Path) -> None:
    dataset = make_dataset(tmp_path / "dataset")
    bench = tmp_path / "benchmark"
    build_benchmark(str(dataset), str(bench), size=3)

    logs, name = tmp_path / "runs", "tiny"
    train = [
        sys.executable, "-m", "ray_jobs.training.train",
        "--manifest", str(dataset / "manifest.json"),
        "--exclude-articles", str(bench / "excluded_articles.txt"),
        "--model", "pmcvl-tiny", "--context-length", "77",
        "--caption-key", "long_caption;subcaption",
        "--batch-size", "4", "--epochs", "1", "--lr", "1e-3", "--warmup", "1",
        "--workers", "0", "--precision", "fp32", "--device", "cpu", "--log-every-n-steps", "1",
        "--logs", str(logs), "--name", name,
        "--upload-to", str(tmp_path / "uploaded"),
    ]  # fmt: skip
    proc = _run(train, tmp_path)
    assert "excluding 3 articles: 7 samples dropped, 9 kept" in proc.stderr
    out = (logs / name / "out.log").read_text()
    assert re.search(r"train_num_samples: 9\b", out)  # the manifest says 16; 7 are held out
    ckpt = logs / name / "checkpoints" / "epoch_1.pt"
    assert ckpt.is_file()
    assert (tmp_path / "uploaded" / "checkpoints" / "epoch_1.pt").is_file()  # --upload-to

    b = load_benchmark(bench)
    labels = tmp_path / "labels.jsonl"  # a labelled set naming benchmark images by key
    names = ["ct", "xray", "ct"]
    rows = [{"key": p["key"], "label": n} for p, n in zip(b.pairs, names, strict=True)]
    labels.write_text("".join(json.dumps(row) + "\n" for row in rows))
    xcom = tmp_path / "xcom" / "return.json"
    pmcvl = str(Path(sys.executable).with_name("pmcvl"))
    evaluate = [
        pmcvl, "eval-retrieval", "--checkpoint", str(ckpt), "--model", "pmcvl-tiny",
        "--benchmark", str(bench), "--labels", str(labels), "--device", "cpu",
        "--copy-json", str(xcom),
    ]  # fmt: skip
    proc = _run(evaluate, tmp_path)
    result = json.loads((ckpt.parent / "epoch_1.retrieval.json").read_text())
    assert json.loads(proc.stdout) == result == json.loads(xcom.read_text())

    assert result["format"] == "pmcvl-retrieval-eval/1"
    assert result["model"] == "pmcvl-tiny-ctx77" and result["context_length"] == 77
    assert result["benchmark"]["size"] == 3 and result["ks"] == [1, 5, 10, 100]
    assert result["benchmark"]["caption_sources"]["long_caption"] == 1
    retrieval = result["retrieval"]
    assert retrieval["n"] == 3 and retrieval["trivial_ks"] == [5, 10, 100]
    zs = result["zero_shot"]
    assert zs["n"] == 3 and zs["classes"] == ["ct", "xray"] and zs["template"] == "a {} image"

    # the figures themselves, recomputed here from the checkpoint with open_clip directly
    expected = _scores_by_hand(ckpt, b, names, tmp_path)
    for direction in ("image_to_text", "text_to_image"):
        got = retrieval[direction]
        want = expected[direction]
        assert got["R@1"] == pytest.approx(want["R@1"])
        assert got["median_rank"] == pytest.approx(want["median_rank"])
        assert got["mean_rank"] == pytest.approx(want["mean_rank"])
    assert zs["top1"] == pytest.approx(expected["zero_shot_top1"])
    assert result["seconds"] > 0


def _scores_by_hand(ckpt: Path, bench, names: list[str], scratch: Path) -> dict:  # type: ignore[no-untyped-def]
    """Image→text / text→image ranks and zero-shot top-1 from the checkpoint, computed with
    open_clip and numpy alone (ranks counted pairwise), not with ``ray_jobs.benchmark``."""
    import io

    import numpy as np
    import torch
    from PIL import Image

    from ray_jobs.benchmark.evaluate import OFFLINE_ENV, resolve_model

    os.environ.update(OFFLINE_ENV)
    import open_clip

    name = resolve_model(ckpt, "pmcvl-tiny", None, None, scratch / "cfg")
    model, _, preprocess = open_clip.create_model_and_transforms(name, pretrained=str(ckpt))
    model.eval()
    tokenizer = open_clip.get_tokenizer(name)
    with torch.no_grad():
        pixels = torch.stack(
            [preprocess(Image.open(io.BytesIO(img)).convert("RGB")) for img in bench.image_list()]
        )
        img = torch.nn.functional.normalize(model.encode_image(pixels).float(), dim=-1).numpy()
        txt = model.encode_text(tokenizer(bench.captions)).float()
        txt = torch.nn.functional.normalize(txt, dim=-1).numpy()
        classes = sorted(set(names))
        cls = model.encode_text(tokenizer([f"a {c} image" for c in classes])).float()
        cls = torch.nn.functional.normalize(cls, dim=-1).numpy()
    sim = img @ txt.T

    def ranks(matrix: np.ndarray) -> np.ndarray:
        """1-based rank of the diagonal; a tie counts against it (two benchmark images here
        are the same picture, so their scores tie)."""
        n = len(matrix)
        return np.array(
            [1 + sum(matrix[i, j] >= matrix[i, i] for j in range(n) if j != i) for i in range(n)]
        )

    out = {}
    for direction, matrix in (("image_to_text", sim), ("text_to_image", sim.T)):
        r = ranks(matrix)
        out[direction] = {
            "R@1": float(np.mean(r == 1)),
            "median_rank": float(np.median(r)),
            "mean_rank": float(np.mean(r)),
        }
    predicted = [classes[i] for i in np.argmax(img @ cls.T, axis=1)]
    out["zero_shot_top1"] = float(np.mean([p == n for p, n in zip(predicted, names, strict=True)]))
    return out


def test_eval_refuses_an_unknown_model(tmp_path: Path) -> None:
    from ray_jobs.benchmark.evaluate import resolve_model

    ckpt = tmp_path / "run" / "checkpoints" / "epoch_1.pt"
    with pytest.raises(ValueError, match="not a template"):
        resolve_model(ckpt, "ViT-nonexistent", None, None, tmp_path / "scratch")
