"""A threaded insert/update/delete workload on the demo's ``shop`` tables.

It exists to make the pipeline's hard cases happen while someone watches: changes to rows whose
chunk is being read (the watermark backfill), rows moving to another key and so to another chunk
(key updates), multi-row statements (one binlog event, several rows), deletes of rows a chunk
already emitted. Every table is touched. The rate is paced, not best-effort, so a demo's lag
figures mean something: ``rate`` statements per second in total, split evenly across threads,
with the ``insert/update/delete`` mix drawn per statement.

Each statement runs in autocommit on the thread's own connection. A statement that matched no
row (the row was deleted meanwhile) counts as *missed*; a duplicate key (a second workload on
the same tables) as a *conflict*; neither stops the workload. Lost connections are retried.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import pymysql

from cdc_console.core.schema import quote_ident
from cdc_console.core.untyped import Connection, Cursor
from cdc_console.demo import DEFAULT_DATABASE, DEFAULT_RATE, shop
from cdc_console.errors import CdcError, UsageError, redact

log = logging.getLogger("cdc_console.demo")

OPS = ("insert", "update", "delete")
#: Share of the statements that go to each table (all tables are touched).
TABLE_WEIGHTS: Mapping[str, float] = {
    "orders": 0.45,
    "customers": 0.2,
    "products": 0.15,
    "coupons": 0.2,
}
#: Share of updates that change the primary key (the row moves to another chunk).
KEY_UPDATE_SHARE = 0.05
#: Share of product updates that touch several rows in one statement.
MULTI_ROW_SHARE = 0.2
#: A thread this far behind its schedule starts afresh instead of bursting to catch up.
MAX_BACKLOG_SECONDS = 1.0
#: Consecutive failed statements after which a thread gives up.
MAX_CONSECUTIVE_ERRORS = 50
ER_DUP_ENTRY = 1062


@dataclass(frozen=True)
class WorkloadMix:
    """Relative weights of inserts, updates and deletes; parsed from ``"60/30/10"``."""

    insert: float = 60.0
    update: float = 30.0
    delete: float = 10.0

    @classmethod
    def parse(cls, text: str) -> WorkloadMix:
        parts = text.replace(" ", "").split("/")
        try:
            values = [float(p) for p in parts]
        except ValueError:
            values = []
        if len(values) != 3 or any(v < 0 for v in values) or sum(values) <= 0:
            raise UsageError(
                f"--mix {text!r} is not three non-negative weights insert/update/delete",
                "write it as e.g. --mix 60/30/10 (they need not add up to 100)",
            )
        return cls(*values)

    @property
    def weights(self) -> tuple[float, float, float]:
        return (self.insert, self.update, self.delete)

    def shares(self) -> dict[str, float]:
        total = sum(self.weights)
        return {op: weight / total for op, weight in zip(OPS, self.weights, strict=True)}

    def choose(self, rng: random.Random) -> str:
        return rng.choices(OPS, weights=self.weights)[0]

    def __str__(self) -> str:
        return "/".join(f"{w:g}" for w in self.weights)


class Pacer:
    """Spaces calls ``1/rate`` seconds apart on a fixed schedule, so slow statements do not lower
    the rate (the next one starts sooner) unless the thread falls more than a second behind."""

    def __init__(self, rate: float, clock: Callable[[], float] = time.monotonic) -> None:
        if rate <= 0:
            raise ValueError("rate must be positive")
        self.interval = 1.0 / rate
        self.clock = clock
        self.next_at = clock()

    def delay(self) -> float:
        """Seconds to wait before the next statement; call once per statement."""
        now = self.clock()
        if self.next_at < now - MAX_BACKLOG_SECONDS:
            self.next_at = now
        wait = max(0.0, self.next_at - now)
        self.next_at += self.interval
        return wait


@dataclass
class WorkloadCounts:
    """What the workload did: statements by kind and by table, and when."""

    ops: Counter[str] = field(default_factory=Counter)
    tables: Counter[str] = field(default_factory=Counter)
    started_at: float | None = None
    stopped_at: float | None = None

    @property
    def total(self) -> int:
        return sum(self.tables.values())

    @property
    def seconds(self) -> float:
        if self.started_at is None:
            return 0.0
        return (self.stopped_at or time.monotonic()) - self.started_at

    def summary(self) -> str:
        o = self.ops
        rate = self.total / self.seconds if self.seconds > 0 else 0.0
        return (
            f"{self.total:,} statements in {self.seconds:.1f} s ({rate:.1f}/s): "
            f"{o['insert']:,} inserts, {o['update'] + o['key_update'] + o['multi_row']:,} updates "
            f"({o['key_update']:,} key changes, {o['multi_row']:,} multi-row), "
            f"{o['delete']:,} deletes; {o['missed']:,} missed, {o['conflict']:,} conflicts, "
            f"{o['error']:,} errors"
        )


class KeySpace:
    """The keys of one integer-keyed table: new keys come from a shared counter above the
    seeded ones, probes for existing rows are drawn uniformly from the range in use."""

    def __init__(self, low: int, high: int) -> None:
        self.low = low
        self._next = high + 1
        self._lock = threading.Lock()

    def new_key(self) -> int:
        with self._lock:
            key = self._next
            self._next += 1
            return key

    def skip(self, amount: int) -> None:
        """Jump past keys someone else (another workload) is using."""
        with self._lock:
            self._next += amount

    def probe(self, rng: random.Random) -> int:
        with self._lock:
            high = self._next - 1
        return rng.randint(self.low, max(self.low, high))


class Workload:
    """``threads`` writer threads at ``rate`` statements/s in total, until ``stop()``.

    ``connect`` opens a new autocommit connection (one per thread, plus one to read the key
    ranges); the database must hold the demo tables (``shop.seed``).
    """

    def __init__(
        self,
        connect: Callable[[], Connection],
        database: str = DEFAULT_DATABASE,
        *,
        rate: float = DEFAULT_RATE,
        mix: WorkloadMix | None = None,
        threads: int = 2,
        seed: int | None = None,
    ) -> None:
        if rate <= 0:
            raise UsageError(f"--rate {rate:g} must be positive", "use e.g. --rate 50")
        if threads < 1:
            raise UsageError(f"--threads {threads} must be at least 1", "use e.g. --threads 2")
        self.connect = connect
        self.database = database
        self.rate = rate
        self.mix = mix or WorkloadMix()
        self.threads = threads
        self.seed = seed if seed is not None else random.randrange(1 << 30)
        self.counts = WorkloadCounts()
        self.keys: dict[str, KeySpace] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._workers: list[threading.Thread] = []
        self.failures: list[str] = []

    # -- lifecycle ------------------------------------------------------------------------------

    def prepare(self) -> None:
        """Read each table's key range; a missing table is an error with the fix."""
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                for spec in shop.TABLES:
                    name = f"{quote_ident(self.database)}.{quote_ident(spec.name)}"
                    try:
                        if spec.name == "coupons":
                            cur.execute(f"SELECT 1 FROM {name} LIMIT 1")
                            continue
                        cur.execute(f"SELECT MIN({spec.key}), MAX({spec.key}) FROM {name}")
                    except pymysql.err.ProgrammingError:
                        raise CdcError(
                            f"table {self.database}.{spec.name} does not exist: the workload "
                            "writes to the demo's shop tables",
                            "create and seed them with 'cdc-console workload --seed 300000 ...' "
                            "or run 'cdc-console demo'",
                        ) from None
                    low, high = cur.fetchone()
                    self.keys[spec.name] = KeySpace(int(low or 1), int(high or 0))
        finally:
            conn.close()

    def start(self) -> Workload:
        if not self.keys:
            self.prepare()
        self.counts.started_at = time.monotonic()
        for index in range(self.threads):
            worker = threading.Thread(
                target=self._run, args=(index,), name=f"workload-{index}", daemon=True
            )
            self._workers.append(worker)
            worker.start()
        log.info(
            "workload: %g statements/s on %s (mix insert/update/delete %s, %d threads)",
            self.rate,
            ", ".join(f"{self.database}.{t}" for t in shop.TABLE_NAMES),
            self.mix,
            self.threads,
        )
        return self

    def stop(self, timeout: float = 30.0) -> WorkloadCounts:
        """Stop the threads (each finishes its current statement) and return the counts."""
        self._stop.set()
        deadline = time.monotonic() + timeout
        for worker in self._workers:
            worker.join(max(0.1, deadline - time.monotonic()))
        if self.counts.started_at is not None and self.counts.stopped_at is None:
            self.counts.stopped_at = time.monotonic()
        return self.counts

    @property
    def running(self) -> bool:
        return any(w.is_alive() for w in self._workers)

    # -- the writer threads ---------------------------------------------------------------------

    def _count(self, table: str, outcome: str) -> None:
        with self._lock:
            self.counts.tables[table] += 1
            self.counts.ops[outcome] += 1

    def _run(self, index: int) -> None:
        rng = random.Random(self.seed * 1000 + index)
        pacer = Pacer(self.rate / self.threads)
        conn: Connection | None = None
        consecutive_errors = 0
        warned: set[str] = set()
        try:
            while not self._stop.wait(pacer.delay()):
                table = rng.choices(list(TABLE_WEIGHTS), weights=list(TABLE_WEIGHTS.values()))[0]
                try:
                    if conn is None:
                        conn = self.connect()
                    outcome = self.step(conn, rng, table)
                    consecutive_errors = 0
                except pymysql.err.IntegrityError as exc:
                    if exc.args and exc.args[0] == ER_DUP_ENTRY:
                        outcome = "conflict"
                        if table in self.keys:
                            self.keys[table].skip(rng.randint(100, 1000))
                    else:
                        outcome = self._error(exc, warned)
                        consecutive_errors += 1
                except (pymysql.err.OperationalError, pymysql.err.InterfaceError) as exc:
                    outcome = self._error(exc, warned)
                    consecutive_errors += 1
                    _close(conn)
                    conn = None
                    self._stop.wait(0.5)
                except pymysql.err.MySQLError as exc:
                    outcome = self._error(exc, warned)
                    consecutive_errors += 1
                self._count(table, outcome)
                if consecutive_errors >= MAX_CONSECUTIVE_ERRORS:
                    message = f"workload thread {index} gave up after {consecutive_errors} errors"
                    log.error("%s", message)
                    self.failures.append(message)
                    return
        finally:
            _close(conn)

    def _error(self, exc: BaseException, warned: set[str]) -> str:
        text = redact(str(exc))
        kind = text.split(",")[0]
        if kind not in warned:
            warned.add(kind)
            log.warning("workload: statement failed (shown once per kind): %s", text)
        return "error"

    # -- statements -----------------------------------------------------------------------------

    def _table(self, name: str) -> str:
        return f"{quote_ident(self.database)}.{quote_ident(name)}"

    def _existing(
        self, cur: Cursor, table: str, key: str, probe: shop.DemoKey
    ) -> shop.DemoKey | None:
        """A key present in ``table`` at or after ``probe`` (wrapping around), or None if empty."""
        name = self._table(table)
        cur.execute(f"SELECT {key} FROM {name} WHERE {key} >= %s ORDER BY {key} LIMIT 1", (probe,))
        row = cur.fetchone()
        if row is None:
            cur.execute(f"SELECT {key} FROM {name} ORDER BY {key} LIMIT 1")
            row = cur.fetchone()
        return row[0] if row else None

    def _probe(self, table: str, rng: random.Random) -> shop.DemoKey:
        if table == "coupons":
            return shop.random_code(rng)
        return self.keys[table].probe(rng)

    def _new_key(self, table: str, rng: random.Random) -> shop.DemoKey:
        if table == "coupons":
            return shop.random_code(rng)
        return self.keys[table].new_key()

    def step(self, conn: Connection, rng: random.Random, table: str) -> str:
        """Run one statement on ``table``; return its outcome (insert, update, ..., missed)."""
        op = self.mix.choose(rng)
        spec = shop.table(table)
        name = self._table(table)
        with conn.cursor() as cur:
            if op == "insert":
                cur.execute(*self._insert(table, rng))
                return "insert"
            target = self._existing(cur, table, spec.key, self._probe(table, rng))
            if target is None:
                return "missed"
            if op == "delete":
                cur.execute(f"DELETE FROM {name} WHERE {spec.key} = %s", (target,))
                return "delete" if cur.rowcount else "missed"
            if rng.random() < KEY_UPDATE_SHARE:
                new_key = self._new_key(table, rng)
                cur.execute(
                    f"UPDATE {name} SET {spec.key} = %s WHERE {spec.key} = %s", (new_key, target)
                )
                return "key_update" if cur.rowcount else "missed"
            if table == "products" and rng.random() < MULTI_ROW_SHARE:
                cur.execute(
                    f"UPDATE {name} SET stock = stock + %s WHERE product_id >= %s "
                    "ORDER BY product_id LIMIT 5",
                    (rng.randint(1, 20), target),
                )
                return "multi_row" if cur.rowcount else "missed"
            sql, args = self._update(table, rng)
            cur.execute(f"UPDATE {name} SET {sql} WHERE {spec.key} = %s", (*args, target))
            return "update" if cur.rowcount else "missed"

    def _insert(self, table: str, rng: random.Random) -> tuple[str, shop.DemoRow]:
        name = self._table(table)
        key = self._new_key(table, rng)
        if table == "orders":
            products = self.keys["products"]
            return (
                f"INSERT INTO {name} (order_id, order_date, order_time, quantity, product_id, "
                "purchaser) VALUES (%s, CURRENT_DATE, NOW(3), %s, %s, %s)",
                (key, rng.randint(1, 99), products.probe(rng), rng.choice(shop.PURCHASERS)),
            )
        if table == "customers":
            first = rng.choice(shop.PURCHASERS)
            return (
                f"INSERT INTO {name} (customer_id, name, email, country, credit_limit, vip, "
                "created_at) VALUES (%s, %s, %s, %s, %s, 0, NOW(6))",
                (
                    key,
                    f"{first.capitalize()} {key}",
                    f"{first}.{key}@example.com",
                    rng.choice(shop.COUNTRIES),
                    f"{rng.randrange(0, 5_000_000) / 100:.2f}",
                ),
            )
        if table == "products":
            return (
                f"INSERT INTO {name} (product_id, sku, name, price, stock, weight_kg, attributes) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                (
                    key,
                    f"SKU-{key:07d}",
                    f"New {rng.choice(shop.PRODUCT_WORDS)}",
                    f"{rng.randrange(99, 99_999) / 100:.2f}",
                    rng.randint(0, 500),
                    round(rng.uniform(0.05, 40.0), 3),
                    json.dumps({"colour": rng.choice(shop.COLOURS), "tags": []}),
                ),
            )
        return (
            f"INSERT INTO {name} (code, customer_id, discount_pct, valid_until, redeemed, note) "
            "VALUES (%s, %s, %s, CURRENT_DATE + INTERVAL 90 DAY, 0, %s)",
            (
                key,
                self.keys["customers"].probe(rng),
                rng.choice((5, 10, 15, 20)),
                "issued by the workload",
            ),
        )

    def _update(self, table: str, rng: random.Random) -> tuple[str, shop.DemoRow]:
        """The SET clause of a plain update of one row, and its arguments."""
        if table == "orders":
            return "quantity = %s, order_time = NOW(3)", (rng.randint(1, 99),)
        if table == "customers":
            choice = rng.random()
            if choice < 0.5:
                return "credit_limit = %s", (f"{rng.randrange(0, 5_000_000) / 100:.2f}",)
            if choice < 0.8:
                return "vip = 1 - vip", ()
            return "country = %s", (rng.choice(shop.COUNTRIES),)
        if table == "products":
            if rng.random() < 0.3:
                return "attributes = JSON_SET(COALESCE(attributes, '{}'), '$.colour', %s)", (
                    rng.choice(shop.COLOURS),
                )
            return "stock = GREATEST(stock - %s, 0), price = %s", (
                rng.randint(1, 5),
                f"{rng.randrange(99, 99_999) / 100:.2f}",
            )
        return "redeemed = redeemed + 1, note = %s", (f"redeemed at {time.strftime('%H:%M:%S')}",)


def _close(conn: Connection | None) -> None:
    """Close a connection that may already be broken."""
    if conn is not None:
        with contextlib.suppress(Exception):
            conn.close()
