"""What one message costs inside the process: the conversation use case without HTTP.

Runs the labelled messages (shuffled, impossible amounts left out, each opening a new
case, as `bench/load.py` sends them to `/v1/messages`) through
`Conversation.reply` on a fresh SQLite file and, with `--db postgres`, on a fresh
PostgreSQL schema, and prints per message: the median wall time of `--repeat` runs, and
the database transactions and statements it took (counted by SQLAlchemy events, so
they are exact, not sampled).

    python bench/conversation.py --messages 1000 --repeat 3 --db sqlite,postgres
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.machine import describe_machine  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def messages(count: int, seed: int = 11) -> list[str]:
    from calibration.data import load_labelled
    from handlers.extract import InvalidAmount, parse_amounts

    texts = [r.text for r in load_labelled(ROOT / "datasets" / "routes")]
    random.Random(seed).shuffle(texts)
    out = []
    for text in texts:
        try:
            parse_amounts(text)
        except InvalidAmount:
            continue
        out.append(text)
        if len(out) == count:
            break
    return out


@contextmanager
def database(kind: str) -> Iterator[str]:
    """A fresh SQLite file or PostgreSQL schema (its URL), removed afterwards."""
    if kind == "sqlite":
        with tempfile.TemporaryDirectory(prefix="bench-conversation-") as tmp:
            yield f"sqlite:///{Path(tmp) / 'shop.db'}"
        return
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    schema = f"bench_{uuid.uuid4().hex[:12]}"
    admin = create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield make_url(POSTGRES_URL).update_query_dict(
            {"options": f"-csearch_path={schema}"}).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def run(kind: str, texts: list[str], warmup: int) -> dict[str, float]:
    from sqlalchemy import event

    from router.app.bootstrap import build_services
    from router.app.conversation import IncomingMessage
    from router.settings import Settings

    with database(kind) as url, tempfile.TemporaryDirectory() as var:
        services = build_services(Settings(var_dir=Path(var), database_url=url))
        counts = {"transactions": 0, "statements": 0}

        def on_begin(_conn: object) -> None:
            counts["transactions"] += 1

        def on_execute(*_args: object) -> None:
            counts["statements"] += 1

        event.listen(services.engine, "begin", on_begin)
        event.listen(services.engine, "before_cursor_execute", on_execute)
        try:
            for text in texts[:warmup]:
                services.conversation.reply(IncomingMessage(text=text))
            counts.update(transactions=0, statements=0)
            measured = texts[warmup:]
            start = time.perf_counter()
            for text in measured:
                services.conversation.reply(IncomingMessage(text=text))
            elapsed = time.perf_counter() - start
        finally:
            services.close()
    n = len(measured)
    return {"us_per_message": elapsed / n * 1e6, "transactions": counts["transactions"] / n,
            "statements": counts["statements"] / n}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--db", default="sqlite,postgres", help="sqlite, postgres or both")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    texts = messages(args.messages + args.warmup)
    print(describe_machine())
    print(f"{args.messages} messages after {args.warmup} of warm-up, median of {args.repeat}")
    print(f"{'db':<10} {'µs/message':>11} {'transactions':>13} {'statements':>11}")
    results = {}
    for kind in [d for d in args.db.split(",") if d]:
        runs = [run(kind, texts, args.warmup) for _ in range(args.repeat)]
        row = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
        results[kind] = row
        print(f"{kind:<10} {row['us_per_message']:>11,.0f} {row['transactions']:>13.2f} "
              f"{row['statements']:>11.2f}")
    if args.json:
        args.json.write_text(json.dumps({"machine": describe_machine(), **results}, indent=2))


if __name__ == "__main__":
    main()
